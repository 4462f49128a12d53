"""The context before a turn (ingestion rules 5, 6, 10): its parentUuid chain as OpenAI messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ingestion.budget import cut_text, cut_value
from ingestion.claude_code.convert import user_messages
from ingestion.claude_code.session import Group, Node, Session
from ingestion.stats import IngestStats

MISSING_RESULT = "[no tool result was recorded in the session]"

Lookup = Callable[[str], dict[str, Any] | None]


def chain(session: Session, start: str | None) -> list[Node]:
    """Ancestors of a node, oldest first, cut at the latest compaction.

    The compact summary starts the new context; the boundary record and all before it are dropped.
    """
    out: list[Node] = []
    seen: set[str] = set()
    uuid = start
    while uuid is not None and uuid not in seen:
        node = session.nodes.get(uuid)
        if node is None or node.compact_boundary:
            break
        seen.add(uuid)
        out.append(node)
        if node.compact_summary:
            break
        uuid = node.parent
    out.reverse()
    return out


class MessageCache:
    """Converted (and budget-cut) messages per record, shared by every state of a session."""

    def __init__(self, session: Session, limit: int, stats: IngestStats) -> None:
        self.session = session
        self.limit = limit
        self.stats = stats
        self._user: dict[str, list[dict[str, Any]]] = {}
        self._assistant: dict[str, dict[str, Any] | None] = {}

    def user(self, node: Node) -> list[dict[str, Any]]:
        cached = self._user.get(node.uuid)
        if cached is None:
            cached = self._user[node.uuid] = [self._cut(m) for m in user_messages(node.content)]
        return cached

    def assistant(self, group: Group) -> dict[str, Any] | None:
        if group.key not in self._assistant:
            action = group.action
            message: dict[str, Any] | None = None
            if action.content.strip() or action.tool_calls:
                message = self._cut(action.to_message())
            self._assistant[group.key] = message
        return self._assistant[group.key]

    def _cut(self, message: dict[str, Any]) -> dict[str, Any]:
        content = message.get("content") or ""
        calls = message.get("tool_calls")
        if len(content) <= self.limit and not calls:
            return message
        out = dict(message, content=cut_text(content, self.limit))
        if calls:
            out["tool_calls"] = [dict(c, function={"name": c["function"]["name"],
                                                   "arguments": cut_value(c["function"]["arguments"],
                                                                          self.limit)})
                                 for c in calls]
        if out != message:
            self.stats.budget["truncated_messages"] += 1
        return out


def build_history(session: Session, group: Group, cache: MessageCache,
                  stats: IngestStats) -> list[dict[str, Any]]:
    """Messages before `group`'s turn: user text, tool results, earlier assistant responses."""
    messages: list[dict[str, Any]] = []
    emitted: set[str] = {group.key}
    for node in chain(session, group.first.parent):
        if node.type == "user":
            messages.extend(cache.user(node))
        elif node.type == "assistant" and node.group not in emitted:
            emitted.add(node.group)
            earlier = session.groups[node.group]
            if earlier.synthetic:
                continue
            message = cache.assistant(earlier)
            if message is not None:
                messages.append(message)

    def lookup(call_id: str) -> dict[str, Any] | None:
        found = session.results.get(call_id)
        if found is None or found[0] >= group.first.seq:
            return None
        node = session.nodes[found[1]]
        return next((m for m in cache.user(node) if m.get("tool_call_id") == call_id), None)

    paired, missing, orphans = pair_tool_results(messages, lookup)
    stats.budget["missing_tool_results"] += missing
    stats.budget["orphan_tool_results"] += orphans
    return paired


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
                result = {"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT}
            out.append(result)
    orphans = len(set(results) - used)
    return out, missing, orphans
