"""One redaction pass per state, before anything is written or sent (`replay.pipeline` runs it right
after ingestion): messages, tools, the student's action (thinking included) and metadata.

Per message it is `teachers.redact.redact_value`, a pure function of (text, key), so every state of a
trace carries the very same redacted messages (lead decision C1): a message object shared by the
states of a trace is redacted once and the redacted copy is shared in turn. Token ids and logprobs of
a rollout state encode the raw text; a state in which anything was redacted loses them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ingestion.exact import same_json, same_prefix
from ingestion.schema import Action, TraceState
from teachers.person_names import people_pass
from teachers.pseudonyms import PREFIX, Pseudonyms
from teachers.redact import redact_found, redact_value

# Rollout metadata that is the raw text in another form.
TOKEN_FIELDS = ("prompt_token_ids", "completion_token_ids", "logprobs", "tokens")
# Metadata the readers fill with ids and times the agent or the API made: structure, like a message's
# `id`, kept intact (`recovery` names a state id that must still match it). Each is new at every state,
# so scanning them was a third of the redaction pass's texts on real sessions (issue #29).
METADATA_IDS = frozenset({"message_id", "request_id", "session_id", "agent_id", "timestamp", "recovery"})


def redact_action(action: Action, key: bytes | None = None, pseudonyms: Pseudonyms | None = None
                  ) -> tuple[Action, list[tuple[str, str]]]:
    """An action with every string redacted (content, tool-call arguments, thinking), and what was found
    (`pseudonyms`: personal data too).

    Field by field rather than through `model_dump`: a state's action is new text, but its dump and
    walk cost more than the scan on real sessions, and most actions hold nothing.

    >>> redact_action(Action(content="ok"))
    (Action(content='ok', tool_calls=[], thinking=None), [])
    """
    content, found_text = redact_found(action.content, key, pseudonyms)
    found = list(found_text)
    thinking = action.thinking
    if thinking is not None:
        thinking, found_text = redact_found(thinking, key, pseudonyms)
        found += found_text
    calls = []
    for call in action.tool_calls:
        arguments, hits = redact_value(call.arguments, key, None, pseudonyms)
        found += hits
        calls.append(call.model_copy(update={"arguments": arguments}) if hits else call)
    if not found:
        return action, []
    # Copies, not validated again: the values are the action's own with placeholders put in (a
    # validation per action was a tenth of pseudonymisation's cost on real sessions, issue #55).
    return action.model_copy(update={"content": content, "tool_calls": calls, "thinking": thinking}), found


class StateRedactor:
    """`redactor(state)` → the redacted state. `counts` holds distinct secrets per trace, by kind, summed
    over traces (a secret repeated in every later state of its trace counts once), and so the personal
    data `pseudonyms` replaced (kinds `pii:<kind>`: `split_counts`); `states_token_ids_dropped` counts
    rollout states that lost their token ids."""

    def __init__(self, key: bytes | None = None, pseudonyms: Pseudonyms | None = None,
                 names: bool = False) -> None:
        self.key = key
        self.pseudonyms = pseudonyms
        # Names in prose (issue #58, teachers/person_names.py): with pseudonyms, where spaCy's model is had.
        self.people = people_pass(pseudonyms) if names and pseudonyms is not None else None
        self.counts: Counter[str] = Counter()
        self.states_token_ids_dropped = 0
        self._trace: str | None = None
        self._seen: set[tuple[str, str]] = set()
        self._memo: dict[int, tuple[Any, Any, list[tuple[str, str]]]] = {}
        self._last: tuple[list[Any], list[Any], bool] = ([], [], False)
        self._last_tools: tuple[list[Any] | None, list[Any], list[tuple[str, str]]] = (None, [], [])

    @property
    def hits(self) -> set[tuple[str, str]]:
        """The distinct secrets (rule, digest) found so far in the current trace, each counted once."""
        return self._seen

    def _shared(self, value: Any) -> tuple[Any, list[tuple[str, str]]]:
        # Keyed by identity within one trace (the object is kept alive in the memo, so its id is not
        # reused); equal content met as another object is still memoised per string by redact_found.
        memo = self._memo.get(id(value))
        if memo is not None and memo[0] is value:
            return memo[1], memo[2]
        redacted, found = redact_value(value, self.key, None, self.pseudonyms)
        self._memo[id(value)] = (value, redacted, found)
        return redacted, found

    def _messages(self, originals: list[Any]) -> tuple[list[Any], bool, list[tuple[str, str]]]:
        """(redacted messages, whether the part shared with the previous state held any hit, the hits
        of the rest). A state's history mostly extends the previous state's: that part is redacted
        already, found with one list comparison instead of a memo lookup per message (which grows with
        the square of a session's length), and its hits were counted with that state, so they are not
        handed on again (with pseudonymisation every home path is one: 1.2 million hits walked again on
        a real 64 MB corpus, issue #55). Compared as JSON, not by `==` (ingestion/exact.py): a message
        resent with `1.0` for `1` or its keys in another order keeps its own bytes."""
        previous, redacted, hit_before = self._last
        if same_prefix(originals, previous):
            messages, before, rest = list(redacted), hit_before, originals[len(previous):]
        else:
            messages, before, rest = [], False, originals
        found: list[tuple[str, str]] = []
        for message in rest:
            out, new = self._shared(message)
            messages.append(out)
            found += new
        self._last = (originals, messages, before or bool(found))
        return messages, before, found

    def _tools(self, originals: list[Any]) -> tuple[list[Any], list[tuple[str, str]]]:
        # A trace's states share one tool list: so do their redacted states (the writer then stores
        # it once by identity, without serialising tens of kB of schemas again for every state). The
        # traces of a session mostly have equal lists: one comparison instead of a walk of the schemas.
        # What it found is counted again in every trace that uses it. The same JSON, not `==` (issue
        # #55): an Anthropic-API rollout's tools, equal but in another key order, went on into the next
        # rollouts' states, and only in a process that had read that rollout just before.
        previous, redacted, found = self._last_tools
        if originals is not previous:
            if previous is None or not same_json(originals, previous):
                redacted, found = [], []
                for tool in originals:
                    out, hits = self._shared(tool)
                    redacted.append(out)
                    found += hits
            self._last_tools = (originals, redacted, found)
        return redacted, list(found)

    def __call__(self, state: TraceState) -> TraceState:
        if state.trace_id != self._trace:   # (the last tool list stays: see _tools)
            self._trace, self._memo, self._seen, self._last = state.trace_id, {}, set(), ([], [], False)
        messages, hit_before, found = self._messages(state.messages)
        tools, hits = self._tools(state.tools)
        found += hits
        action, hits = redact_action(state.student_action, self.key, self.pseudonyms)
        found += hits
        if self.people is not None:
            messages, action, hits = self.people(state.trace_id, messages, action)
            found += hits
        scanned, hits = redact_value({k: v for k, v in state.metadata.items() if k not in METADATA_IDS},
                                     self.key, None, self.pseudonyms)
        found += hits
        metadata = {k: v if k in METADATA_IDS else scanned[k] for k, v in state.metadata.items()}
        if (hit_before or found) and any(metadata.get(name) is not None for name in TOKEN_FIELDS):
            metadata = {**metadata, **{name: None for name in TOKEN_FIELDS if name in metadata}}
            self.states_token_ids_dropped += 1
        for hit in found:
            if hit not in self._seen:
                self._seen.add(hit)
                self.counts[hit[0]] += 1
        # A copy even when nothing was found: the states of a trace then share the same message objects.
        return state.model_copy(update={"messages": messages, "tools": tools, "student_action": action,
                                        "metadata": metadata})


def split_counts(counts: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """(secrets by rule, personal data by kind) of a redactor's `counts`, each sorted by name.

    >>> split_counts({"pii:email": 2, "github-pat": 1})
    ({'github-pat': 1}, {'email': 2})
    """
    secrets = {k: n for k, n in sorted(counts.items()) if not k.startswith(PREFIX)}
    personal = {k.removeprefix(PREFIX): n for k, n in sorted(counts.items()) if k.startswith(PREFIX)}
    return secrets, personal
