"""States from a linear conversation: what the readers of other agents' logs (Codex, Gemini, Copilot)
build, one `Conversation` per trace, and turn into TraceStates the same way.

A conversation is its items in order: OpenAI messages (user text, tool results), the student's `Turn`s
(one per assistant response that acts) and `Reset`s (a compaction: the context is replaced by what the
agent sent from then on). Every state is the synthetic system prompt, then the history before its turn
as the agent sent it, each message cut to the message limit once and fitted to the budget
(ingestion/budget.py), exactly as for Claude Code. The invariants every reader relies on are kept here:

- every tool call in the history is answered by tool messages before the next user or assistant
  message (a call without a recorded result is answered by `MISSING_RESULT`, counted), and a tool
  message that answers no call is dropped (counted);
- consecutive user messages are merged, assistant text loses its blank edge lines, tool messages carry
  the name of their call (ingestion/messages.py);
- each turn's outcome is built from its calls' results (ingestion/outcome.py); a failed turn names the
  next turn of the trace as its recovery.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ingestion.budget import Budget, count_fit, cut_message, message_chars
from ingestion.ids import Claim, Seen
from ingestion.messages import join_users, strip_blank_lines
from ingestion.options import IngestOptions
from ingestion.outcome import call_outcome, is_failed, turn_outcome
from ingestion.prompt import system_message
from ingestion.schema import Action, TraceState, make_state_id
from ingestion.stats import IngestStats

MISSING_RESULT = "[no result was recorded for this call]"


@dataclass
class Turn:
    """One assistant response that acts (text or tool calls), reasoning already dropped."""

    action: Action
    key: str                       # dedup key across files: the same response copied gives no 2nd state
    model: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    aborted: bool = False          # the user stopped the turn (its calls without result: interrupted)


@dataclass
class Reset:
    """A compaction: from here the agent sent these messages instead of the history before."""

    messages: list[dict[str, Any]]


@dataclass
class Conversation:
    trace_id: str
    source: str
    environment: dict[str, Any]                 # cwd, git_branch, timestamp, version, agent
    items: list[dict[str, Any] | Turn | Reset] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)   # call id -> call outcome
    meta: dict[str, Any] = field(default_factory=dict)                 # every state's metadata
    sidechain: bool = False
    episode: dict[str, Any] = field(default_factory=dict)   # facts of the whole run (resolved, exit_status)

    def turns(self) -> list[Turn]:
        return [item for item in self.items if isinstance(item, Turn)]


class _History:
    """The context so far, kept valid for chat templates as messages arrive."""

    def __init__(self, limit: int, stats: IngestStats) -> None:
        self.limit, self.stats = limit, stats
        self.messages: list[dict[str, Any]] = []
        self.pending: dict[str, str] = {}      # call id -> tool name, calls not answered yet
        self.chars = 0                         # of the messages: the budget's cheap upper bound

    def _cut(self, message: dict[str, Any]) -> dict[str, Any]:
        out = cut_message(message, self.limit)
        self.stats.budget["truncated_messages"] += out is not message
        return out

    def settle(self) -> None:
        """Answer every call still open, so the next user or assistant message follows its results."""
        for call_id, name in self.pending.items():
            self.stats.history["missing_tool_result"] += 1
            self._append({"role": "tool", "tool_call_id": call_id, "name": name, "content": MISSING_RESULT})
        self.pending = {}

    def add(self, message: dict[str, Any]) -> None:
        role = message.get("role")
        if role == "tool":
            name = self.pending.pop(message.get("tool_call_id") or "", None)
            if name is None:
                self.stats.history["orphan_tool_result"] += 1
                return
            self._append(self._cut({**message, "name": message.get("name") or name}))
            return
        self.settle()
        if role == "assistant" and isinstance(message.get("content"), str):
            message = {**message, "content": strip_blank_lines(message["content"])}
        message = self._cut(message)
        if role == "user" and self.messages and self.messages[-1].get("role") == "user":
            self.chars -= message_chars(self.messages[-1])
            self.messages[-1] = join_users(self.messages[-1], message)
            self.chars += message_chars(self.messages[-1])
        else:
            self._append(message)
        for call in message.get("tool_calls") or ():
            self.pending[call["id"]] = call["function"]["name"]

    def _append(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.chars += message_chars(message)

    def reset(self, messages: list[dict[str, Any]]) -> None:
        self.messages, self.pending, self.chars = [], {}, 0
        for message in messages:
            self.add(message)


def _outcomes(conversation: Conversation) -> list[dict[str, Any]]:
    outcomes = []
    for turn in conversation.turns():
        calls = []
        for call in turn.action.tool_calls:
            found = conversation.results.get(call.id)
            if found is None:
                found = call_outcome(call.id, call.name, "interrupted" if turn.aborted else "no_result")
            calls.append(found)
        outcomes.append(turn_outcome(calls, "interrupted" if turn.aborted and not calls else None,
                                     **conversation.episode))
    return outcomes


def conversation_states(conversation: Conversation, tools: list[dict[str, Any]], options: IngestOptions,
                        stats: IngestStats, seen: Seen, budget: Budget) -> Iterator[TraceState]:
    """One state per turn of `conversation`, numbered before dedup (a state keeps its id whichever
    files a run reads); a turn whose key was seen in an earlier file gives none. A trace whose new
    states' ids an earlier file already gave (other content, one session id) takes a distinct, stable
    id (`ingestion.ids`), as Claude Code sessions do."""
    if conversation.sidechain and not options.include_subagents:
        stats.skipped_traces["subagent"] += 1
        return
    turns = conversation.turns()
    if not turns:
        stats.skipped_traces["no_turns"] += 1
        return
    stats.traces += 1
    grant = seen.claim([Claim(conversation.source, conversation.trace_id,
                              [(n, turn.key) for n, turn in enumerate(turns)])])[0]
    if grant.trace_id != conversation.trace_id:
        stats.trace_id_collisions += 1
        conversation.trace_id = grant.trace_id
    built = set(grant.turns)
    outcomes = _outcomes(conversation)
    ids = [make_state_id(conversation.source, conversation.trace_id, n) for n in range(len(turns))]
    system = system_message(conversation.environment, tools)
    history = _History(options.message_limit(), stats)
    number = 0
    for item in conversation.items:
        if isinstance(item, Reset):
            history.reset(item.messages)
            stats.history["compactions"] += 1
            continue
        if not isinstance(item, Turn):
            history.add(item)
            continue
        history.settle()
        turn, outcome, number = number, outcomes[number], number + 1
        if turn not in built:
            stats.skipped_turns["duplicate_message_id"] += 1
        else:
            stats.states += 1
            yield _state(conversation, item, turn, ids, outcome, [system, *history.messages], tools,
                         budget, stats, history.chars + len(system["content"]))
        history.add(item.action.to_message())


def _state(conversation: Conversation, item: Turn, turn: int, ids: list[str], outcome: dict[str, Any],
           messages: list[dict[str, Any]], tools: list[dict[str, Any]], budget: Budget,
           stats: IngestStats, chars: int) -> TraceState:
    metadata = {**conversation.meta, **item.meta, "message_id": item.key, "outcome": outcome}
    if is_failed(outcome) and turn + 1 < len(ids):
        metadata["recovery"] = ids[turn + 1]
    messages, dropped, over = budget.fit(messages, tools, item.action.to_message(), chars=chars)
    count_fit(stats, budget, dropped, over)
    if dropped:
        metadata["dropped_messages"] = dropped
    return TraceState.model_construct(
        state_id=ids[turn], trace_id=conversation.trace_id, turn=turn, source=conversation.source,
        messages=messages, tools=tools, student_action=item.action, student_model=item.model,
        metadata=metadata)
