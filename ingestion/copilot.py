"""GitHub Copilot CLI session events → TraceStates (`~/.copilot/session-state/<id>/events.jsonl`; older
builds: `~/.copilot/session-state/<id>.jsonl`).

Lines are events `{type, data, id, timestamp, parentId}`; `ephemeral` ones (streaming deltas) are not
the conversation. Read: `session.start` (session id, cwd, branch, CLI version, the selected model),
`session.model_change` (the model of the turns after it), `user.message` (`content`),
`assistant.message` (one model response: `content` and `toolRequests`, its `model` where recorded) and
`tool.execution_complete` (a call's `result.content` or `error`, and `success`). Dropped:
`reasoningText` / `reasoningOpaque` (never kept, never sent), a sub-agent's messages (events with an
`agentId` or a `parentToolCallId`: counted), every other event type (counted). An `abort` event
interrupts the last turn's open calls.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingestion.agent_tools import agent_name, agent_tools
from ingestion.budget import Budget
from ingestion.codex.items import parse_arguments
from ingestion.ids import Seen
from ingestion.jsonl import iter_records
from ingestion.linear import Conversation, Turn, conversation_states
from ingestion.options import IngestOptions
from ingestion.outcome import call_outcome
from ingestion.schema import Action, ToolCall, TraceState
from ingestion.stats import IngestStats

SOURCE = "copilot"


def copilot_states(path: Path, options: IngestOptions, stats: IngestStats,
                   seen: Seen) -> Iterator[TraceState]:
    """Every state of one Copilot CLI events file; `seen` carries turn keys and state ids across files."""
    try:
        conversation = _read(path, stats)
    except OSError as error:
        stats.problem(str(path), None, "unreadable_file", action="file", detail=error.strerror or str(error))
        return
    tools = agent_tools(SOURCE, (c for t in conversation.turns() for c in t.action.tool_calls))
    yield from conversation_states(conversation, tools, options, stats, seen, Budget(options))


def _text(value: Any) -> str:
    """Event content as text (a string, or parts with `text`).

    >>> _text("hi"), _text([{"type": "text", "text": "a"}, {"text": "b"}]), _text(None)
    ('hi', 'a\\nb', '')
    """
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _calls(data: dict[str, Any], stats: IngestStats) -> list[ToolCall]:
    calls = []
    for n, request in enumerate(data.get("toolRequests") or ()):
        if not isinstance(request, dict):
            continue
        arguments, parsed = parse_arguments(request.get("arguments"))
        stats.history["copilot_unparsed_arguments"] += not parsed
        calls.append(ToolCall(id=str(request.get("toolCallId") or f"{data.get('messageId')}-{n}"),
                              name=str(request.get("name") or "tool"), arguments=arguments))
    return calls


def _read(path: Path, stats: IngestStats) -> Conversation:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:16]
    conversation = Conversation(digest, SOURCE, {"agent": agent_name(SOURCE)}, meta={"file": str(path)})
    model: str | None = None
    names: dict[str, str] = {}
    for line, event in iter_records(path, stats):
        kind, data = event.get("type"), event.get("data") if isinstance(event.get("data"), dict) else {}
        stats.record_types[f"copilot.{kind}"] += 1
        if event.get("ephemeral"):
            continue
        if event.get("agentId") or data.get("parentToolCallId"):
            stats.skipped_records["copilot.subagent"] += 1
            continue
        if kind == "session.start":
            context = data.get("context") if isinstance(data.get("context"), dict) else {}
            conversation.trace_id = str(data.get("sessionId") or digest)
            model = data.get("selectedModel") or model
            conversation.environment.update(cwd=context.get("cwd"), git_branch=context.get("branch"),
                                            timestamp=data.get("startTime") or event.get("timestamp"),
                                            version=data.get("copilotVersion"))
            conversation.meta.update(session_id=data.get("sessionId"), cwd=context.get("cwd"),
                                     git_branch=context.get("branch"), version=data.get("copilotVersion"))
        elif kind == "session.model_change":
            model = data.get("newModel") or model
        elif kind == "user.message":
            conversation.items.append({"role": "user", "content": _text(data.get("content"))})
        elif kind == "assistant.message":
            if data.get("reasoningText") or data.get("reasoningOpaque"):
                stats.history["reasoning_dropped"] += 1
            action = Action(content=_text(data.get("content")), tool_calls=_calls(data, stats))
            if not (action.content.strip() or action.tool_calls):
                stats.skipped_turns["no_text_or_tool_use"] += 1
                continue
            names.update((c.id, c.name) for c in action.tool_calls)
            key = data.get("messageId") or event.get("id") or f"{conversation.trace_id}:{line}"
            meta = {"line": line, "timestamp": event.get("timestamp")}
            conversation.items.append(Turn(action, f"copilot:{key}", data.get("model") or model, meta))
        elif kind == "tool.execution_complete":
            _result(conversation, data, names)
        elif isinstance(kind, str) and "abort" in kind:
            turns = conversation.turns()
            if turns:
                turns[-1].aborted = True
        else:
            stats.skipped_records[f"copilot.{kind}"] += 1
    return conversation


def _result(conversation: Conversation, data: dict[str, Any], names: dict[str, str]) -> None:
    call_id = str(data.get("toolCallId") or "")
    result = data.get("result") if isinstance(data.get("result"), dict) else {}
    error = data.get("error")
    error_text = (error.get("message") if isinstance(error, dict) else error) or None
    text = _text(result.get("content")) or (str(error_text) if error_text else "")
    conversation.items.append({"role": "tool", "tool_call_id": call_id, "content": text})
    failed = data.get("success") is False or error_text is not None
    conversation.results[call_id] = call_outcome(call_id, names.get(call_id, "tool"),
                                                 "error" if failed else "ok",
                                                 str(error_text or text) if failed else None)
