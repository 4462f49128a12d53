"""The context before a turn (ingestion rules 5, 6, 10): its parentUuid chain as OpenAI messages."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ingestion.budget import cut_message, message_chars
from ingestion.claude_code.convert import user_messages
from ingestion.claude_code.session import Group, Node, Session
from ingestion.messages import is_user, join_users, merge_user_runs
from ingestion.stats import IngestStats

MISSING_RESULT = "[no tool result was recorded in the session]"
MEMO_SIZE = 16   # prefixes kept: turns mostly extend the turn just before; a branch walks a bit further
STOP_FEEDBACK = "Stop hook feedback:\n"   # the CLI's words (getStopHookMessage)

Lookup = Callable[[str], dict[str, Any] | None]


def chain(session: Session, start: str | None, stop: Callable[[str], bool] = lambda _u: False
          ) -> tuple[list[Node], str | None]:
    """Ancestors of a node, oldest first, cut at the latest compaction.

    The compact summary starts the new context, followed by the messages the CLI kept verbatim
    (2.1.3xx: `Session.preserved`); the boundary record and all else before it are dropped. The walk
    also ends at the first node for which `stop` holds, returned second.
    """
    out: list[Node] = []
    seen: set[str] = set()
    uuid = start
    stopped_at = None
    while uuid is not None and uuid not in seen:
        if stop(uuid):
            stopped_at = uuid
            break
        node = session.nodes.get(uuid)
        if node is None or node.compact_boundary:
            break
        seen.add(uuid)
        if node.compact_summary:
            kept = (session.nodes.get(u) for u in reversed(session.preserved.get(uuid, ())))
            out.extend(n for n in kept if n is not None)
            out.append(node)
            break
        out.append(node)
        uuid = node.parent
    out.reverse()
    return out, stopped_at


@dataclass
class _Prefix:
    """History up to and including one node, kept so the next turn only converts what is new."""

    raw: list[dict[str, Any]]
    paired: list[dict[str, Any]]
    emitted: set[str]
    calls: set[str]
    clean: bool          # every call answered in place, no orphan result
    chars: int


class MessageCache:
    """Converted (and budget-cut) messages per record, shared by every state of a session."""

    def __init__(self, session: Session, limit: int, stats: IngestStats) -> None:
        self.session = session
        self.limit = limit
        self.stats = stats
        self._user: dict[str, list[dict[str, Any]]] = {}
        self._assistant: dict[str, dict[str, Any] | None] = {}
        self._names: dict[str, str] | None = None

    def user(self, node: Node) -> list[dict[str, Any]]:
        cached = self._user.get(node.uuid)
        if cached is None:
            cached = self._user[node.uuid] = [self._cut(self._named(m)) for m in user_messages(node.content)]
        return cached

    def _named(self, message: dict[str, Any]) -> dict[str, Any]:
        """A tool message gains the name of the tool it answers (templates such as Hermes need it)."""
        if message.get("role") != "tool":
            return message
        if self._names is None:
            self._names = {call.id: call.name for group in self.session.groups.values()
                           for call in group.action.tool_calls}
        name = self._names.get(message.get("tool_call_id") or "")
        return message if name is None else {"role": "tool", "tool_call_id": message["tool_call_id"],
                                             "name": name, "content": message.get("content", "")}

    def feedback(self, texts: list[str]) -> dict[str, Any]:
        """The user message a blocking Stop hook's texts became (one per hook, merged as the API does)."""
        return self._cut({"role": "user", "content": "\n".join(STOP_FEEDBACK + t for t in texts)})

    def assistant(self, group: Group) -> dict[str, Any] | None:
        if group.key not in self._assistant:
            action = group.action
            message: dict[str, Any] | None = None
            if action.content.strip() or action.tool_calls:
                message = self._cut(action.to_message())
            self._assistant[group.key] = message
        return self._assistant[group.key]

    def _cut(self, message: dict[str, Any]) -> dict[str, Any]:
        out = cut_message(message, self.limit)
        if out is not message:
            self.stats.budget["truncated_messages"] += 1
        return out


class HistoryBuilder:
    """Histories of a session's turns. Turns of one conversation share their prefix, so each
    history extends the one memoised at the nearest ancestor instead of walking to the root.
    Only the latest MEMO_SIZE prefixes are kept: each is as long as its history, and keeping one per
    turn would make memory grow with the square of the session's length."""

    def __init__(self, session: Session, cache: MessageCache, stats: IngestStats) -> None:
        self.session = session
        self.cache = cache
        self.stats = stats
        self._memo: OrderedDict[str, _Prefix] = OrderedDict()

    def build(self, group: Group) -> tuple[list[dict[str, Any]], int]:
        """Messages before `group`'s turn and their total size in characters."""
        start = group.first.parent
        nodes, hit = chain(self.session, start, self._memo.__contains__)
        base = self._memo[hit] if hit else _Prefix([], [], set(), set(), True, 0)
        emitted = set(base.emitted)
        emitted.add(group.key)
        segment = self._convert(nodes, emitted, base.raw[-1]["role"] if base.raw else None)
        emitted.discard(group.key)
        lookup = self._lookup(group)
        seg_calls = {c.get("id") or "" for m in segment for c in m.get("tool_calls") or ()}
        seg_results = {m.get("tool_call_id") for m in segment if m.get("role") == "tool"}
        if base.clean and seg_results <= seg_calls and not seg_calls & base.calls:
            # Nothing new answers an old call: pairing the new part alone gives the same result.
            tail, missing, orphans = pair_tool_results(segment, lookup)
            paired, added = _extend(base.paired, merge_user_runs(tail))
            chars = base.chars + added
        else:
            paired, missing, orphans = pair_tool_results(base.raw + segment, lookup)
            paired = merge_user_runs(paired)
            chars = sum(message_chars(m) for m in paired)
        self.stats.budget["missing_tool_results"] += missing
        self.stats.budget["orphan_tool_results"] += orphans
        prefix = _Prefix(base.raw + segment, paired, emitted, base.calls | seg_calls,
                         base.clean and not missing and not orphans, chars)
        if start is not None:
            self._memo[start] = prefix
            self._memo.move_to_end(start)
            if len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return paired, prefix.chars

    def _convert(self, nodes: list[Node], emitted: set[str], last_role: str | None) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        pending: list[str] = []   # a blocking Stop hook's feedback not yet followed by a user message

        def settle() -> None:
            # Two assistant messages in a row with a blocked Stop hook between: the model saw the
            # hook's feedback as a user turn, which the transcript did not always keep.
            if pending and (messages[-1]["role"] if messages else last_role) == "assistant":
                messages.append(self.cache.feedback(pending))
                self.stats.history["hook_feedback"] += 1
            pending.clear()

        for node in nodes:
            if node.feedback is not None:
                if node.feedback_complete:
                    pending.clear()
                pending.extend(node.feedback)
            elif node.type == "user":
                messages.extend(self.cache.user(node))
            elif node.type == "assistant" and node.group not in emitted:
                emitted.add(node.group)
                earlier = self.session.groups[node.group]
                if earlier.synthetic:
                    continue
                message = self.cache.assistant(earlier)
                if message is not None:
                    settle()
                    messages.append(message)
        settle()
        return messages

    def _lookup(self, group: Group) -> Lookup:
        def lookup(call_id: str) -> dict[str, Any] | None:
            found = self.session.results.get(call_id)
            if found is None or found[0] >= group.first.seq:
                return None
            node = self.session.nodes[found[1]]
            return next((m for m in self.cache.user(node) if m.get("tool_call_id") == call_id), None)

        return lookup


def _extend(paired: list[dict[str, Any]], tail: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """`paired + tail` with user messages meeting at the seam merged, and the characters the tail
    added."""
    if paired and tail and is_user(paired[-1]) and is_user(tail[0]):
        joined = join_users(paired[-1], tail[0])
        added = message_chars(joined) - message_chars(paired[-1]) + sum(message_chars(m) for m in tail[1:])
        return [*paired[:-1], joined, *tail[1:]], added
    return paired + tail, sum(message_chars(m) for m in tail)


def pair_tool_results(messages: list[dict[str, Any]],
                      lookup: Lookup = lambda _id: None) -> tuple[list[dict[str, Any]], int, int]:
    """Put each tool result right after the assistant message that called it.

    Results found elsewhere (parallel calls logged on side branches) come from `lookup`;
    a call with no result anywhere gets a placeholder; results answering no call are dropped.
    Returns (messages, placeholders added, orphan results dropped).

    >>> msgs = [{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}, {"id": "b"}]},
    ...         {"role": "tool", "tool_call_id": "b", "content": "B"}, {"role": "user", "content": "hi"},
    ...         {"role": "tool", "tool_call_id": "z", "content": "?"}]
    >>> out, missing, orphans = pair_tool_results(msgs)
    >>> [m.get("tool_call_id", m["role"]) for m in out], missing, orphans
    (['assistant', 'a', 'b', 'user'], 1, 1)
    """
    results: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.get("role") == "tool":
            results.setdefault(message.get("tool_call_id") or "", message)
    used: set[str] = set()
    out: list[dict[str, Any]] = []
    missing = 0
    for message in messages:
        role = message.get("role")
        if role == "tool":
            continue
        out.append(message)
        if role != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            call_id = call.get("id") or ""
            if call_id in used:
                continue
            used.add(call_id)
            result = results.get(call_id) or lookup(call_id)
            if result is None:
                missing += 1
                result = {"role": "tool", "tool_call_id": call_id,
                          "name": (call.get("function") or {}).get("name") or "", "content": MISSING_RESULT}
            out.append(result)
    orphans = len(set(results) - used)
    return out, missing, orphans
