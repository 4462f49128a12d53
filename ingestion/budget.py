"""Budgets (ingestion rule 10): cut oversized messages, drop the oldest exchanges of long prompts.

A state's context is fitted when it is ingested, so teachers and the dataset see the same prompt:

- the teachers' budget, `--max-prompt-tokens`: prompt + tools;
- the training length, `--max-length N`: prompt + tools + the longer of chosen and rejected. Chosen is not
  known yet, so `N // COMPLETION_SHARE` tokens are reserved for it (or the student's action, when longer);
  `replay.export.preflight` re-checks every row against N once chosen is known.

Tokens are counted with `--tokenizer` when given, else estimated at `CHARS_PER_TOKEN` characters each,
plus `MESSAGE_OVERHEAD` tokens per message for the role markers a chat template adds.

Two transformations, both the same in every state of a trace (decision C1), so each state's prompt
extends the previous state's prompt and providers' prompt caches hit:

1. per message: a message longer than the message limit is cut to head + tail (`cut_text`); a pure
   function of the message alone (done once per message in `claude_code/history.py`).
2. per state: the system prompt and the first user message are always kept; whole exchanges (an
   assistant message with its tool results, and what follows up to the next assistant message) are
   dropped oldest first, **in large steps** (`trim_start`): the kept part starts at the first assistant
   message whose offset (tokens of droppable messages before it) is at least `ceil(excess / step) * step`,
   where `step = (limit - fixed) // 2` (`fixed` = tools + system prompt + first user message). The cut only
   moves when the history has grown by another `step` tokens, so consecutive states share their trimmed
   prefix; a state's prompt extends the previous state's exactly unless the trim point moved between them.
   A state whose own action is longer than the reserve takes a larger multiple of the same step.
   A trimmed state records `metadata["dropped_messages"]`: along one branch of a trace, the trim point
   moved between two consecutive states exactly when that count differs (absent = 0).

Pure functions; the caller counts what was cut.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from ingestion.options import CHARS_PER_TOKEN, IngestOptions
from ingestion.schema import TraceState
from ingestion.stats import IngestStats
from ingestion.tokens import MESSAGE_OVERHEAD, TokenCounter, counter_for


def cut_text(text: str, limit: int) -> str:
    """Keep head and tail of an oversized text, saying how much was cut.

    >>> cut_text("abcdefghij", 4)
    'ab\\n[... 6 characters cut ...]\\nij'
    >>> cut_text("short", 10)
    'short'
    """
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[len(text) - tail:]}"


def cut_value(value: Any, limit: int) -> Any:
    """`cut_text` applied to every string inside a JSON-like value (tool-call arguments).

    >>> cut_value({"content": "abcdefghij", "n": 1}, 4)["n"]
    1
    """
    if isinstance(value, str):
        return cut_text(value, limit)
    if isinstance(value, dict):
        return {key: cut_value(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [cut_value(item, limit) for item in value]
    return value


def cut_message(message: dict[str, Any], limit: int) -> dict[str, Any]:
    """A message with its text and tool-call argument strings cut to `limit` characters (head + tail);
    the message itself when nothing is over. Pure: the same message is cut the same in every state.

    >>> cut_message({"role": "tool", "content": "abcdefghij"}, 4)["content"]
    'ab\\n[... 6 characters cut ...]\\nij'
    >>> m = {"role": "user", "content": "short"}
    >>> cut_message(m, 10) is m
    True
    """
    content = message.get("content") or ""
    calls = message.get("tool_calls")
    long_calls = bool(calls) and len(orjson.dumps(calls)) > limit
    if len(content) <= limit and not long_calls:
        return message
    out = dict(message, content=cut_text(content, limit))
    if long_calls:
        out["tool_calls"] = [dict(c, function={"name": c["function"]["name"],
                                               "arguments": cut_value(c["function"]["arguments"], limit)})
                             for c in calls]
    return message if out == message else out


def message_chars(message: dict[str, Any]) -> int:
    """Rough size of a message as sent: its text plus its tool calls as JSON.

    >>> message_chars({"role": "user", "content": "hello"})
    5
    """
    size = len(message.get("content") or "")
    if message.get("tool_calls"):
        size += len(orjson.dumps(message["tool_calls"]))
    return size


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """Tokens of a prompt at CHARS_PER_TOKEN characters each.

    >>> estimate_tokens([{"role": "user", "content": "x" * 40}])
    10
    """
    chars = sum(message_chars(m) for m in messages)
    if tools:
        chars += len(orjson.dumps(tools))
    return chars // CHARS_PER_TOKEN


def trim_start(cum: list[int], assistants: list[int], head: int, excess: int, step: int) -> int:
    """Where the kept tail starts: messages[head:start] are dropped (see the module docstring).
    `cum[i]` is the size of the first i messages, `assistants` the assistant messages' positions in
    order: two binary searches, not a pass over the history.

    The start is an assistant message, so no tool result loses its call and roles still alternate
    after the first user message; the last message is always kept. Returns `head` when nothing need
    go or nothing can.

    >>> roles = ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
    >>> cum = [0, 10, 20, 70, 120, 170, 220, 230]   # sizes 10, 10, 50, 50, 50, 50, 10
    >>> trim_start(cum, [2, 4], 2, excess=60, step=100)   # drop 100 tokens: the first exchange
    4
    >>> trim_start(cum, [2, 4], 2, excess=30, step=100)   # the same grid point for a smaller excess
    4
    >>> trim_start(cum, [2, 4], 2, excess=0, step=100)
    2
    """
    if excess <= 0:
        return head
    target = -(-excess // max(step, 1)) * max(step, 1)
    lo = bisect_left(assistants, head + 1)
    if lo == len(assistants):
        return head
    # Offsets of later assistant messages never shrink (sizes are >= 0): the first one at the target.
    found = bisect_left(assistants, cum[head] + target, lo=lo, key=cum.__getitem__)
    return assistants[found] if found < len(assistants) else assistants[-1]


class Budget:
    """The budget of one session's states. Message sizes are memoised by identity: the history
    builder hands every state of a trace the same message objects."""

    def __init__(self, options: IngestOptions, counter: TokenCounter | None = None) -> None:
        self.counter = counter or counter_for(options.tokenizer)
        self.max_prompt = options.max_prompt_tokens
        self.max_length = options.max_length
        self.reserve = options.completion_reserve()
        self._sizes: dict[int, tuple[dict[str, Any], int]] = {}
        self._tools: dict[int, tuple[list[dict[str, Any]], int]] = {}
        # The last fitted messages with their running token sums and assistant positions: the next
        # state of a trace extends them, so fitting it costs its new messages, not its whole history
        # (a 20 MB session spent two thirds of its ingestion re-summing histories).
        self._last: list[dict[str, Any]] = []
        self._cum: list[int] = [0]
        self._assistants: list[int] = []

    def size(self, message: dict[str, Any]) -> int:
        hit = self._sizes.get(id(message))
        if hit is None or hit[0] is not message:
            hit = self._sizes[id(message)] = (message, self.counter.message(message))
        return hit[1]

    def tools_size(self, tools: list[dict[str, Any]]) -> int:
        hit = self._tools.get(id(tools))
        if hit is None or hit[0] is not tools:
            hit = self._tools[id(tools)] = (tools, self.counter.tools(tools))
        return hit[1]

    def limits(self, action_tokens: int) -> tuple[int, int]:
        """(this state's prompt limit, the trace's grid limit) in tokens, tools included."""
        if self.max_length is None:
            return self.max_prompt, self.max_prompt
        grid = min(self.max_prompt, self.max_length - self.reserve)
        return min(grid, self.max_length - max(self.reserve, action_tokens)), grid

    def fit(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
            action: dict[str, Any] | None = None, chars: int | None = None
            ) -> tuple[list[dict[str, Any]], int, bool]:
        """Fit one state's messages: (messages, messages dropped, still over the limit)."""
        action_tokens = self.counter.message(action) if action is not None and self.max_length else 0
        limit, grid = self.limits(action_tokens)
        tools_tokens = self.tools_size(tools)
        if chars is not None and self.counter.tokenizer is None:
            # An upper bound of the estimate without a pass over the messages.
            bound = chars // CHARS_PER_TOKEN + len(messages) * (MESSAGE_OVERHEAD + 1) + tools_tokens
            if bound <= limit:
                return messages, 0, False
        cum, assistants = self._running_sums(messages)
        total = tools_tokens + cum[-1]
        if total <= limit:
            return messages, 0, False
        first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), 0)
        head = first_user + 1
        fixed = tools_tokens + cum[head]
        start = trim_start(cum, assistants, head, total - limit, max((grid - fixed) // 2, 1))
        kept = total - (cum[start] - cum[head])
        return messages[:head] + messages[start:], start - head, kept > limit

    def _running_sums(self, messages: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
        """Token sums before each message (`cum[i]` = tokens of messages[:i]) and the assistant
        positions, reusing the previous state's when these messages extend its messages."""
        last = self._last
        # A C-level comparison: identical objects compare equal without looking inside them.
        if len(messages) >= len(last) and messages[:len(last)] == last:
            cum, assistants, begin = self._cum, self._assistants, len(last)
        else:  # another branch or trace: start over
            cum, assistants, begin = [0], [], 0
        for index in range(begin, len(messages)):
            message = messages[index]
            cum.append(cum[-1] + self.size(message))
            if message.get("role") == "assistant":
                assistants.append(index)
        self._last, self._cum, self._assistants = list(messages), cum, assistants
        return cum, assistants


def fit_states(states: Iterable[TraceState], options: IngestOptions,
               stats: IngestStats) -> Iterator[TraceState]:
    """Budgets for states read whole (collected rollouts): each message cut, then the state fitted."""
    budget = Budget(options)
    limit = options.message_limit()
    for state in states:
        messages = []
        for message in state.messages:
            messages.append(cut := cut_message(message, limit))
            stats.budget["truncated_messages"] += cut is not message
        messages, dropped, over = budget.fit(messages, state.tools, state.student_action.to_message())
        count_fit(stats, budget, dropped, over)
        metadata = {**state.metadata, "dropped_messages": dropped} if dropped else state.metadata
        yield state.model_copy(update={"messages": messages, "metadata": metadata})


def count_fit(stats: IngestStats, budget: Budget, dropped: int, over: bool) -> None:
    """The report's `budget` counters for one fitted state."""
    if dropped:
        stats.budget["states_trimmed"] += 1
        stats.budget["dropped_messages"] += dropped
    if over:
        stats.budget["states_over_max_length" if budget.max_length else "states_over_prompt_budget"] += 1
