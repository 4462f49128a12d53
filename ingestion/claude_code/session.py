"""One session file, indexed: the uuid DAG, merged assistant responses, tool results.

Only what state building needs is kept per record, so memory is bounded by the largest
session, not the corpus.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestion.claude_code.convert import assistant_action
from ingestion.jsonl import iter_records
from ingestion.schema import Action
from ingestion.stats import IngestStats

CONVERSATION = ("user", "assistant")
SYNTHETIC_MODEL = "<synthetic>"


@dataclass(slots=True)
class Node:
    """A record in the parentUuid DAG. Non-conversation records keep only their links."""

    seq: int                           # position in the file (record order)
    line: int
    uuid: str
    parent: str | None
    type: str
    sidechain: bool = False
    compact_summary: bool = False
    compact_boundary: bool = False
    content: Any = None                # user: message.content; assistant: the block list
    group: str | None = None           # assistant: merged response key
    envelope: dict[str, Any] = field(default_factory=dict)
    # What a blocking Stop hook told the model (stop_hook_summary: all of it; a hook_blocking_error
    # attachment: its part). The CLI sends it as a user message it does not always write down.
    feedback: list[str] | None = None
    feedback_complete: bool = False


@dataclass
class Group:
    """One assistant API response, written as one or more lines sharing message.id."""

    key: str
    nodes: list[Node]
    model: str | None
    synthetic: bool
    request_id: str | None = None
    _action: Action | None = None

    @property
    def first(self) -> Node:
        return self.nodes[0]

    @property
    def action(self) -> Action:
        if self._action is None:
            self._action = assistant_action([b for n in self.nodes for b in n.content])
        return self._action


@dataclass
class Session:
    path: Path
    session_id: str | None = None      # the first sessionId the file's records carry
    file: str = ""                     # str(path), made once: every state's metadata names it
    nodes: dict[str, Node] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    results: dict[str, tuple[int, str]] = field(default_factory=dict)  # tool_use_id -> (seq, uuid)
    shapes: list[tuple[int, list[dict[str, Any]]]] = field(default_factory=list)
    # compact summary uuid -> the uuids the CLI kept verbatim after it (2.1.3xx `preservedMessages`)
    preserved: dict[str, list[str]] = field(default_factory=dict)


_ENVELOPE = ("cwd", "gitBranch", "timestamp", "version", "sessionId", "agentId")
STOP_EVENTS = ("Stop", "SubagentStop")


def load_session(path: Path, stats: IngestStats) -> Session:
    """Read and index one session file, counting every record type and bad line."""
    name = str(path)
    session = Session(path, file=name)
    for seq, (line, record) in enumerate(iter_records(path, stats)):
        kind = record.get("type")
        kind = kind if isinstance(kind, str) else "<missing>"
        stats.record_types[kind] += 1
        if kind not in CONVERSATION:
            stats.skipped_records[kind] += 1
            if kind == "api-request-shape":
                _add_shape(session, seq, record)
        if session.session_id is None and isinstance(record.get("sessionId"), str):
            session.session_id = record["sessionId"]
        uuid = record.get("uuid")
        if not isinstance(uuid, str):
            if kind in CONVERSATION:
                stats.problem(name, line, "missing_uuid")
            continue
        if uuid in session.nodes:
            stats.skipped_turns["duplicate_uuid"] += 1
            continue
        if record.get("subtype") == "compact_boundary":
            _add_preserved(session, record)
        parent = record.get("parentUuid")
        node = Node(seq=seq, line=line, uuid=uuid, parent=parent if isinstance(parent, str) else None,
                    type=kind, sidechain=bool(record.get("isSidechain")),
                    compact_summary=bool(record.get("isCompactSummary")),
                    compact_boundary=record.get("subtype") == "compact_boundary")
        session.nodes[uuid] = node
        if kind in CONVERSATION:
            _fill(session, node, record, stats, name)
        elif kind in ("system", "attachment"):
            _hook_feedback(node, record)
    return session


def _hook_feedback(node: Node, record: dict[str, Any]) -> None:
    """Keep the text of a blocking Stop hook: the CLI sent it to the model as `Stop hook feedback:\n…`."""
    if record.get("subtype") == "stop_hook_summary":
        errors = record.get("hookErrors")
        texts = [e for e in errors if isinstance(e, str) and e.strip()] if isinstance(errors, list) else []
        if texts:
            node.feedback, node.feedback_complete = texts, True
        return
    attachment = record.get("attachment")
    if not isinstance(attachment, dict) or attachment.get("type") != "hook_blocking_error" \
            or attachment.get("hookEvent") not in STOP_EVENTS:
        return
    blocking = attachment.get("blockingError")
    text = blocking.get("blockingError") if isinstance(blocking, dict) else blocking
    if isinstance(text, str) and text.strip():
        node.feedback = [text]


def _fill(session: Session, node: Node, record: dict[str, Any], stats: IngestStats, name: str) -> None:
    message = record.get("message")
    if not isinstance(message, dict):
        stats.problem(name, node.line, f"{node.type}_without_message")
        node.type = "broken"  # stays in the DAG so its children keep their history
        return
    node.envelope = {k: record[k] for k in _ENVELOPE if k in record}
    content = message.get("content")
    if node.type == "user":
        node.content = content
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                session.results.setdefault(str(block.get("tool_use_id")), (node.seq, node.uuid))
        return
    node.content = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    model = message.get("model")
    key = message.get("id") if isinstance(message.get("id"), str) else node.uuid
    node.group = key
    group = session.groups.get(key)
    if group is None:
        synthetic = model == SYNTHETIC_MODEL or bool(record.get("isApiErrorMessage"))
        group = session.groups[key] = Group(key, [], model if isinstance(model, str) else None, synthetic,
                                            record.get("requestId"))
    group.nodes.append(node)


def _add_preserved(session: Session, record: dict[str, Any]) -> None:
    """What a compaction kept: newer CLIs (2.1.3xx) send the summary, then the most recent messages
    verbatim, named in the boundary's `compactMetadata`: `preservedMessages.uuids`, or the segment
    `preservedSegment` from head to tail along parentUuid (those records come before the boundary)."""
    meta = record.get("compactMetadata")
    if not isinstance(meta, dict):
        return
    kept, segment = meta.get("preservedMessages"), meta.get("preservedSegment")
    if isinstance(kept, dict) and isinstance(kept.get("anchorUuid"), str) \
            and isinstance(kept.get("uuids"), list):
        session.preserved[kept["anchorUuid"]] = [u for u in kept["uuids"] if isinstance(u, str)]
    elif isinstance(segment, dict) and all(isinstance(segment.get(k), str)
                                           for k in ("anchorUuid", "headUuid", "tailUuid")):
        uuids: list[str] = []
        uuid: str | None = segment["tailUuid"]
        while uuid is not None and uuid in session.nodes and uuid not in uuids:
            uuids.append(uuid)
            if uuid == segment["headUuid"]:
                session.preserved[segment["anchorUuid"]] = uuids[::-1]
                return
            uuid = session.nodes[uuid].parent


def _add_shape(session: Session, seq: int, record: dict[str, Any]) -> None:
    """api-request-shape (CLI 2.1.3xx) records each request's tools with input_schema."""
    shape = record.get("shape")
    tools = shape.get("tools") if isinstance(shape, dict) else None
    if not isinstance(tools, list):
        return
    converted = []
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        schema = dict(tool.get("input_schema") or {"type": "object", "properties": {}})
        schema.pop("$schema", None)
        converted.append({"type": "function", "function": {
            "name": tool["name"], "description": tool.get("description") or "", "parameters": schema}})
    if converted:
        session.shapes.append((seq, converted))
