"""Gemini CLI chat recordings → TraceStates (`~/.gemini/tmp/<project hash>/chats/session-*.json[l]`).

Two layouts (gemini-cli `packages/core/src/services/chatRecordingService.ts`):

- `session-*.json` (older): one object `{sessionId, projectHash, startTime, lastUpdated, messages}`;
- `session-*.jsonl`: a header line `{sessionId, projectHash, startTime, …}`, then an upsert log — a
  message record is written again whole whenever it changes (the second copy of a `gemini` message adds
  its tool calls, results and tokens), `{"$rewindTo": id}` drops that message and all after it, and
  `{"$set": {"messages": […]}}` replaces the model's context (compression, masking).

Messages are `user` / `gemini` (the model) / `info` / `error` / `warning` (the UI's, never sent: dropped,
counted). A `gemini` message that says or calls something is a turn; its `thoughts` are dropped; its
`toolCalls` embed their results (`result`: `functionResponse` parts) and `status` (success / error /
cancelled), which become the tool messages after it and the turn's outcome. A turn's context is the
messages before it when it was first written, in their final version; when that context is not the
previous turn's extended (a rewind, a compression) the history is reset to it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from configs import config_path
from ingestion.agent_tools import agent_name, agent_tools
from ingestion.budget import Budget
from ingestion.ids import Seen
from ingestion.jsonl import iter_records
from ingestion.linear import Conversation, Reset, Turn, conversation_states
from ingestion.options import IngestOptions
from ingestion.outcome import call_outcome
from ingestion.schema import Action, ToolCall, TraceState
from ingestion.stats import IngestStats

SOURCE = "gemini"
WHOLE_FILE_LIMIT = 512 << 20   # an older session-*.json is parsed whole, up to this size


@lru_cache(maxsize=1)
def _rules() -> dict[str, Any]:
    return tomllib.loads(config_path("agent_outcomes.toml").read_text(encoding="utf-8"))["gemini"]


def exit_code(text: str) -> int | None:
    """The exit code a shell call's output ends with (`Exit Code: 1`), or None.

    >>> exit_code("FAILED (errors=1)\\nExit Code: 1\\nProcess Group PGID: 7"), exit_code("ok")
    (1, None)
    """
    found = re.search(_rules()["exit_code"], text[-500:])
    return int(found.group(1)) if found else None


def gemini_states(path: Path, options: IngestOptions, stats: IngestStats,
                  seen: Seen) -> Iterator[TraceState]:
    """Every state of one Gemini CLI session file; `seen` carries turn keys and state ids across files."""
    try:
        log = _load(path, stats)
    except OSError as error:
        stats.problem(str(path), None, "unreadable_file", action="file", detail=error.strerror or str(error))
        return
    if log is None or not log.latest:
        stats.problem(str(path), None, "no_conversation", action="file")
        return
    conversation = log.conversation(path, stats)
    tools = agent_tools(SOURCE, (c for t in conversation.turns() for c in t.action.tool_calls))
    yield from conversation_states(conversation, tools, options, stats, seen, Budget(options))


class _Log:
    """The upsert log replayed: every message's final version, and each turn's context when first seen.

    The context only grows between a rewind or a replacement: each such change starts a new generation,
    and a turn's context is (generation, length), a prefix of its generation's final list of ids, so a
    long session costs no copy of its history per turn."""

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}
        self.order: list[str] = []                    # the context now: message ids, in order
        self.current: set[str] = set()
        self.generation = 0
        self.ended: dict[int, list[str]] = {}         # generation -> its ids when it ended
        self.latest: dict[str, dict[str, Any]] = {}   # id -> final version
        self.lines: dict[str, int] = {}
        self.context: dict[str, tuple[int, int]] = {}  # turn id -> (generation, context length)

    def message(self, record: dict[str, Any], line: int) -> None:
        msg_id = record["id"]
        if msg_id not in self.latest:
            self.lines[msg_id] = line
            if record.get("type") == "gemini":
                self.context[msg_id] = (self.generation, len(self.order))
        self.latest[msg_id] = record
        if msg_id not in self.current:
            self.current.add(msg_id)
            self.order.append(msg_id)

    def _restart(self, order: list[str]) -> None:
        self.ended[self.generation] = self.order
        self.generation += 1
        self.order, self.current = order, set(order)

    def rewind(self, msg_id: str) -> None:
        self._restart(self.order[:self.order.index(msg_id)] if msg_id in self.current else [])

    def replace(self, messages: list[Any], line: int) -> None:
        self._restart([])
        for record in messages:
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                self.message(record, line)

    def finish(self) -> None:
        self.ended[self.generation] = self.order

    def conversation(self, path: Path, stats: IngestStats) -> Conversation:
        meta = self.meta
        directories = meta.get("directories") if isinstance(meta.get("directories"), list) else []
        cwd = directories[0] if directories else None
        environment = {"agent": agent_name(SOURCE), "cwd": cwd, "timestamp": meta.get("startTime")}
        trace_id = str(meta.get("sessionId") or path.stem)
        conversation = Conversation(trace_id, SOURCE, environment, sidechain=meta.get("kind") == "subagent",
                                    meta={"file": str(path), "session_id": meta.get("sessionId"),
                                          "project_hash": meta.get("projectHash"), "cwd": cwd})
        shown: tuple[int, int] | None = None   # (generation, length) of the ids the history holds
        answered: set[str] = set()             # calls whose embedded results the history holds
        for msg_id, (generation, length) in self.context.items():
            record = self.latest[msg_id]
            action, results = _action(record, stats)
            if not (action.content.strip() or action.tool_calls):
                stats.skipped_turns["no_text_or_tool_use"] += 1
                continue
            ids = self.ended[generation]
            if not conversation.items:
                shown = (generation, 0)
            if shown is not None and shown[0] == generation and shown[1] <= length:
                for other in ids[shown[1]:length]:
                    conversation.items.extend(_messages(self.latest[other], stats, answered))
            else:   # a rewind or a replaced context: the history is this turn's context, whole
                answered = set()
                conversation.items.append(Reset([m for other in ids[:length]
                                                 for m in _messages(self.latest[other], stats, answered)]))
            meta = {"line": self.lines[msg_id], "timestamp": record.get("timestamp")}
            conversation.items.append(Turn(action, f"gemini:{msg_id}", record.get("model"), meta))
            conversation.items.extend(_results(record))
            answered.update(c["tool_call_id"] for c in _results(record))
            conversation.results.update(results)
            shown = (generation, length + 1) if ids[length:length + 1] == [msg_id] else None
        return conversation


def _load(path: Path, stats: IngestStats) -> _Log | None:
    log = _Log()
    if path.name.endswith(".json"):
        if path.stat().st_size > WHOLE_FILE_LIMIT:
            stats.problem(str(path), None, "file_too_large", action="file")
            return None
        try:
            whole = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            whole = None
        if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
            log.meta = {k: v for k, v in whole.items() if k != "messages"}
            stats.lines += 1
            stats.record_types["gemini.session"] += 1
            log.replace(whole["messages"], 1)
            log.finish()
            return log
    for line, record in iter_records(path, stats):
        if isinstance(record.get("$rewindTo"), str):
            stats.record_types["gemini.$rewindTo"] += 1
            log.rewind(record["$rewindTo"])
        elif isinstance(record.get("id"), str):
            stats.record_types[f"gemini.{record.get('type')}"] += 1
            log.message(record, line)
        elif isinstance(record.get("$set"), dict):
            stats.record_types["gemini.$set"] += 1
            log.meta.update({k: v for k, v in record["$set"].items() if k != "messages"})
            if isinstance(record["$set"].get("messages"), list):
                log.replace(record["$set"]["messages"], line)
        elif "sessionId" in record:
            stats.record_types["gemini.header"] += 1
            log.meta.update(record)
        else:
            stats.skipped_records["gemini.unknown"] += 1
    log.finish()
    return log


def _text(content: Any) -> str:
    """The text of a message's content (a string or parts); thought parts left out, images `[image]`.

    >>> _text([{"text": "a"}, {"text": "t", "thought": True}, {"inlineData": {}}]), _text("b")
    ('a\\n[image]', 'b')
    """
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    texts = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and not part.get("thought"):
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif "inlineData" in part or "fileData" in part:
                texts.append("[image]")
    return "\n".join(t for t in texts if t)


def _response_text(result: Any, fallback: Any = None) -> tuple[str, str | None]:
    """A tool call's result parts as text, and the error text when the response is an error."""
    for part in result if isinstance(result, list) else [result]:
        response = (part.get("functionResponse") or {}).get("response") if isinstance(part, dict) else None
        if isinstance(response, dict):
            if "error" in response:
                error = response["error"]
                text = error if isinstance(error, str) else orjson.dumps(error).decode()
                return text, text
            output = response.get("output", response)
            return output if isinstance(output, str) else orjson.dumps(output).decode(), None
    text = _text(result) or (fallback if isinstance(fallback, str) else "")
    return text, None


def _calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    calls = [c for c in record.get("toolCalls") or () if isinstance(c, dict)]
    if calls:
        return calls
    parts = record.get("content") if isinstance(record.get("content"), list) else []
    return [{"id": p["functionCall"].get("id") or f"{record['id']}-{i}",
             "name": p["functionCall"].get("name"), "args": p["functionCall"].get("args")}
            for i, p in enumerate(parts)
            if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)]


def _action(record: dict[str, Any], stats: IngestStats) -> tuple[Action, dict[str, dict[str, Any]]]:
    if record.get("thoughts"):
        stats.history["reasoning_dropped"] += 1
    calls, results = [], {}
    for call in _calls(record):
        tool = ToolCall(id=str(call.get("id")), name=str(call.get("name") or "tool"),
                        arguments=call.get("args") if isinstance(call.get("args"), dict) else {})
        calls.append(tool)
        if "status" in call or "result" in call:
            text, error = _response_text(call.get("result"), call.get("resultDisplay"))
            kind = _rules()["status"].get(str(call.get("status")), "error" if error else "ok")
            code = exit_code(text)
            if kind == "ok" and code:
                kind = "error"
            detail = error or (text if kind != "ok" else None)
            results[tool.id] = call_outcome(tool.id, tool.name, kind, detail, code)
    return Action(content=_text(record.get("content")), tool_calls=calls), results


def _results(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool messages answering a `gemini` message's calls (a call without a result gets none)."""
    out = []
    for call in _calls(record):
        if "result" in call or "resultDisplay" in call:
            text, _ = _response_text(call.get("result"), call.get("resultDisplay"))
            out.append({"role": "tool", "tool_call_id": str(call.get("id")), "content": text})
    return out


def _messages(record: dict[str, Any], stats: IngestStats, answered: set[str]) -> list[dict[str, Any]]:
    """A context message as OpenAI messages: a user's text (and the tool results it carries as
    functionResponse parts — newer builds record them so beside the results embedded in the calls:
    those already `answered` are not repeated), a model message with its calls and their results."""
    kind = record.get("type")
    if kind == "user":
        parts = record.get("content") if isinstance(record.get("content"), list) else []
        responses = [p["functionResponse"] for p in parts
                     if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
        stats.history["gemini_result_echo"] += sum(str(r.get("id")) in answered for r in responses)
        tools = [{"role": "tool", "tool_call_id": str(r.get("id")), "content": _response_text(
            [{"functionResponse": r}])[0]} for r in responses if str(r.get("id")) not in answered]
        text = _text(record.get("content"))
        return [*tools, *([{"role": "user", "content": text}] if text else [])]
    if kind == "gemini":
        action, _ = _action(record, IngestStats())
        if not (action.content.strip() or action.tool_calls):
            return []
        results = _results(record)
        answered.update(m["tool_call_id"] for m in results)
        return [action.to_message(), *results]
    stats.skipped_records[f"gemini.{kind}"] += 1   # info / error / warning: the UI's, never sent
    return []
