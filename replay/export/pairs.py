"""One state, its consensus and the student's action → one row of TRL's explicit conversational
preference format (`prompt`, `chosen`, `rejected`, `tools`) plus provenance columns.

Rows hold plain Python objects: tool-call `arguments` are dicts, never JSON strings, because
templates such as Qwen2.5's and Llama 3.1's render `arguments | tojson` unconditionally and would
print a string argument as a quoted JSON string. `replay.export.dataset` stores every message, tool schema
and the votes with `datasets.Json()`, which keeps each object exactly as written (no key merging,
no null-filled keys) and gives dicts back on load.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from consensus.canonical import clean_action
from consensus.intent_rules import IntentContext
from consensus.methods import compare
from consensus.result import ConsensusResult
from ingestion.messages import strip_blank_lines
from ingestion.schema import Action, Proposal, TraceState

PAIR_COLUMNS = ("prompt", "chosen", "rejected", "tools", "state_id", "trace_id", "turn", "source",
                "student_model", "teachers", "winner_teachers", "votes", "agreement", "method", "cost_usd",
                "match", "preflight", "student_outcome")

# Thinking is the student's own; it never enters a preference pair, under any of its names.
_THINKING_KEYS = frozenset({"thinking", "reasoning_content", "reasoning"})


def _arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments  # not JSON: keep it rather than invent an object
    return arguments


def dataset_message(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of one chat message fit for the dataset: thinking keys dropped, string arguments parsed, a
    null `content` (the OpenAI API's, beside tool calls) written as "": chat templates read it as a
    string (SmolLM2's and Qwen3's look for `</think>` in it), and TRL failed on a row with one.

    >>> m = dataset_message({"role": "assistant", "content": None, "thinking": "hmm", "tool_calls": [
    ...     {"id": "c", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}]})
    >>> sorted(m), m["content"], m["tool_calls"][0]["function"]["arguments"]
    (['content', 'role', 'tool_calls'], '', {'command': 'ls'})
    """
    out = {key: value for key, value in message.items() if key not in _THINKING_KEYS}
    if "content" in out and out["content"] is None:
        out["content"] = ""
    if out.get("tool_calls"):
        calls = []
        for call in out["tool_calls"]:
            function = dict(call.get("function", {}))
            function["arguments"] = _arguments(function.get("arguments", {}))
            calls.append({**call, "function": function})
        out["tool_calls"] = calls
    return out


def action_message(action: Action) -> dict[str, Any]:
    """An action as one assistant message, thinking left out, blank lines around its text dropped
    (as ingestion does for the student's: issue #19 item 3).

    >>> action_message(Action(content="\\n\\nDone.", thinking="secret"))
    {'role': 'assistant', 'content': 'Done.'}
    """
    message = dataset_message(action.to_message())
    message["content"] = strip_blank_lines(message.get("content") or "")
    return message


def votes_column(result: ConsensusResult) -> list[dict[str, Any]]:
    """Weight, teachers and tier per group, winner first (similarity groups: each member's score too);
    canonical forms left out (they can be whole files).

    >>> votes_column(ConsensusResult(method="vote", reached=False))
    []
    """
    out = []
    for group in result.groups:
        entry: dict[str, Any] = {"teachers": group.teachers, "weight": group.weight, "match": group.match}
        if group.scores:
            entry["scores"] = group.scores
        out.append(entry)
    return out


def confidence(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """How sure the teachers were, for the dataset card: rows per tier (`match`) and per agreement band.

    >>> confidence([{"match": "exact", "agreement": 1.0}, {"match": "intent", "agreement": 0.6667}])
    {'match': {'exact': 1, 'intent': 1}, 'agreement': {'1.00': 1, '0.67': 1}}
    """
    matches: dict[str, int] = {}
    bands: dict[str, int] = {}
    for row in rows:
        matches[str(row.get("match"))] = matches.get(str(row.get("match")), 0) + 1
        band = f"{float(row.get('agreement') or 0.0):.2f}"
        bands[band] = bands.get(band, 0) + 1
    return {"match": dict(sorted(matches.items())),
            "agreement": dict(sorted(bands.items(), key=lambda kv: kv[0], reverse=True))}


PromptMemo = dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]]


def prompt_columns(state: TraceState, memo: PromptMemo | None = None
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The `prompt` and `tools` of a state's row. With a memo (replay.ablate writes one dataset per
    pool from the same states) they are built once and the very same lists are shared by every row.

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", student_action=Action(),
    ...                messages=[{"role": "user", "content": "hi"}])
    >>> memo = {}
    >>> prompt_columns(s, memo)[0] is prompt_columns(s, memo)[0]
    True
    """
    if memo is not None and state.state_id in memo:
        return memo[state.state_id]
    columns = [dataset_message(m) for m in state.messages], [dict(tool) for tool in state.tools]
    if memo is not None:
        memo[state.state_id] = columns
    return columns


def student_outcome(state: TraceState) -> str | None:
    """The `student_outcome` column: the kind of `metadata["outcome"]` (`ok`, `error`, `rejected`,
    `interrupted`, `no_result`), None (null in the dataset) where the source recorded no outcome.

    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", student_action=Action(),
    ...                messages=[], metadata={"outcome": {"kind": "error", "calls": []}})
    >>> student_outcome(s), student_outcome(s.model_copy(update={"metadata": {}}))
    ('error', None)
    """
    outcome = state.metadata.get("outcome")
    return outcome.get("kind") if isinstance(outcome, dict) else None


def pair_row(state: TraceState, result: ConsensusResult, proposals: Sequence[Proposal],
             memo: PromptMemo | None = None) -> dict[str, Any]:
    """The DPO row of a state already judged a pair. `chosen` is the consensus action cleaned of the
    `cd <cwd> &&` prefix its canonical form ignores; `match` the tier that decided the consensus.
    A state without a consensus (abstained: `replay.export.formats` keeps those for KTO) gets an
    empty `chosen` and no `match`."""
    prompt, tools = prompt_columns(state, memo)
    chosen = ([] if result.action is None
              else [action_message(clean_action(result.action, state.metadata.get("cwd")))])
    return {
        "prompt": prompt,
        "chosen": chosen,
        "rejected": [action_message(state.student_action)],
        "tools": tools,
        "state_id": state.state_id,
        "trace_id": state.trace_id,
        "turn": state.turn,
        "source": state.source,
        "student_model": state.student_model,
        "teachers": list(result.teachers),
        "winner_teachers": list(result.winner_teachers),
        "votes": votes_column(result),
        "agreement": result.agreement,
        "method": result.method,
        "cost_usd": sum(p.cost_usd for p in proposals),
        "match": (result.match or "exact") if result.action is not None else None,
        "preflight": {},  # filled by replay.export.checks with --preflight-template / --preflight-tokenizer
        "student_outcome": student_outcome(state),
    }


def build_pair(state: TraceState, result: ConsensusResult, proposals: Sequence[Proposal],
               cwd: str | None = None, memo: PromptMemo | None = None,
               match: str = "intent") -> dict[str, Any] | None:
    """The DPO row for a state, or None when the teachers abstained or the student agreed with them
    (at the tiers `match` allows: see `consensus.methods.student_match`).

    `cwd` defaults to the state's `metadata["cwd"]`; it decides path equivalence. `cost_usd` sums
    the proposals' cost for this state.

    >>> from ingestion.schema import Action
    >>> state = TraceState(state_id="claude_code:t:0", trace_id="t", turn=0, source="claude_code",
    ...     messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "Hi"}],
    ...     student_action=Action(content="Bye."))
    >>> result = ConsensusResult(method="vote", reached=True, action=Action(content="Hello!"), match="exact")
    >>> row = build_pair(state, result, [], match="exact")
    >>> row["chosen"], row["rejected"], row["match"]
    ([{'role': 'assistant', 'content': 'Hello!'}], [{'role': 'assistant', 'content': 'Bye.'}], 'exact')
    >>> build_pair(state, result.model_copy(update={"action": Action(content="bye.")}), []) is None
    True
    """
    cwd = cwd if cwd is not None else state.metadata.get("cwd")
    context = IntentContext(cwd, state.messages)
    if compare(state.student_action, result, cwd, match, context) != "pair":
        return None
    return pair_row(state, result, proposals, memo)
