"""Codex CLI rollout files → TraceStates (`~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl`,
`archived_sessions/`, under `$CODEX_HOME`).

Lines are `{timestamp, type, payload}` (codex-rs/protocol `RolloutLine`): `session_meta` (the thread: id,
cwd, git, cli_version, source), `turn_context` (the model and effort of the turns that follow),
`response_item` (the conversation, ingestion/codex/items.py), `compacted` (the context is replaced:
`replacement_history` when recorded, else the user messages so far and the summary, as Codex rebuilt it)
and `event_msg` (UI events: only exit codes, patch results and aborted turns are read). Builds before the
envelope wrote a bare header line and bare items; both layouts are read.

A turn is one model response: the assistant-side items between two inputs (tool outputs, user or
developer messages). A file's trace is its first `session_meta`; a later one (a fork or sub-agent
copying its parent's history) is counted, and the copied turns give no second state (their call ids
were seen). A sub-agent thread (`source.subagent`) is a sidechain: read with --include-subagents.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from configs import config_path
from ingestion.agent_tools import agent_name, agent_tools
from ingestion.budget import Budget
from ingestion.codex.items import (
    ASSISTANT_ITEMS,
    OUTPUT_ITEMS,
    WEB_SEARCH_RESULT,
    content_text,
    output_text,
    result_outcome,
    tool_call,
)
from ingestion.ids import Seen
from ingestion.jsonl import iter_records
from ingestion.linear import Conversation, Reset, Turn, conversation_states
from ingestion.options import IngestOptions
from ingestion.schema import Action, ToolCall, TraceState
from ingestion.stats import IngestStats

SOURCE = "codex"


@lru_cache(maxsize=1)
def _rules() -> dict[str, Any]:
    return tomllib.loads(config_path("agent_outcomes.toml").read_text(encoding="utf-8"))["codex"]


def codex_states(path: Path, options: IngestOptions, stats: IngestStats,
                 seen: Seen) -> Iterator[TraceState]:
    """Every state of one Codex rollout file; `seen` carries turn keys and state ids across files."""
    try:
        conversation = _Reader(path, stats).read()
    except OSError as error:
        stats.problem(str(path), None, "unreadable_file", action="file", detail=error.strerror or str(error))
        return
    if conversation is None:
        stats.problem(str(path), None, "no_conversation", action="file")
        return
    tools = agent_tools(SOURCE, (c for t in conversation.turns() for c in t.action.tool_calls))
    yield from conversation_states(conversation, tools, options, stats, seen, Budget(options))


def _envelope(record: dict[str, Any], first: bool) -> tuple[str, Any]:
    """(type, payload) of a line in either layout."""
    kind = record.get("type")
    if "payload" in record and isinstance(kind, str):
        return kind, record["payload"]   # an envelope; a type newer than this reader is skipped, counted
    if "record_type" in record:
        return "state", record
    if first and kind is None and "id" in record:
        return "session_meta", record
    return "response_item", record


class _Reader:
    def __init__(self, path: Path, stats: IngestStats) -> None:
        self.path, self.stats = path, stats
        self.conversation: Conversation | None = None
        self.model: str | None = None
        self.effort: str | None = None
        self.calls: dict[str, ToolCall] = {}
        self.exit_codes: dict[str, int] = {}
        self.text: list[str] = []
        self.turn_calls: list[ToolCall] = []
        self.turn_start: tuple[int, str | None, str | None] | None = None   # line, timestamp, item id
        self.user_texts: list[str] = []
        self.echo: str | None = None   # a user_message event not (yet) seen as a response item
        self.user_since_turn = False   # a user response item since the last turn (the event echoes it)

    def read(self) -> Conversation | None:
        first = True
        for line, record in iter_records(self.path, self.stats):
            kind, payload = _envelope(record, first)
            first = False
            self.stats.record_types[f"codex.{kind}"] += 1
            if not isinstance(payload, dict):
                self.stats.problem(str(self.path), line, "codex_bad_payload")
                continue
            timestamp = record.get("timestamp") or payload.get("timestamp")
            if kind == "session_meta":
                self._meta(payload, timestamp)
            elif kind == "turn_context":
                self.model = payload.get("model") or self.model
                self.effort = payload.get("effort") or self.effort
            elif kind == "response_item":
                self._item(payload, line, timestamp)
            elif kind == "compacted":
                self._compacted(payload)
            elif kind == "event_msg":
                self._event(payload)
            elif kind != "state":
                self.stats.skipped_records[f"codex.{kind}"] += 1
        self._close()
        if self.conversation is not None:
            self._apply_exit_codes()
        return self.conversation

    def _conv(self) -> Conversation:
        if self.conversation is None:   # items before any header: the file's hash names the trace
            digest = hashlib.sha1(str(self.path).encode()).hexdigest()[:16]
            self.conversation = Conversation(digest, SOURCE, {"agent": agent_name(SOURCE)},
                                             meta={"file": str(self.path)})
        return self.conversation

    def _meta(self, payload: dict[str, Any], timestamp: str | None) -> None:
        if self.conversation is not None:
            self.stats.history["codex_extra_session_meta"] += 1   # a fork's or sub-agent's parent
            return
        git = payload.get("git") if isinstance(payload.get("git"), dict) else {}
        source = payload.get("source")
        self.model = payload.get("model") or self.model
        environment = {"agent": agent_name(SOURCE), "cwd": payload.get("cwd"),
                       "git_branch": git.get("branch"), "timestamp": payload.get("timestamp") or timestamp,
                       "version": payload.get("cli_version")}
        meta = {"file": str(self.path), "session_id": payload.get("id"), "cwd": payload.get("cwd"),
                "git_branch": git.get("branch"), "version": payload.get("cli_version"),
                "model_provider": payload.get("model_provider"), "originator": payload.get("originator")}
        sidechain = (isinstance(source, dict) and "subagent" in source) \
            or payload.get("thread_source") == "subagent"
        trace_id = str(payload.get("id") or hashlib.sha1(str(self.path).encode()).hexdigest()[:16])
        self.conversation = Conversation(trace_id, SOURCE, environment, meta=meta, sidechain=bool(sidechain))

    def _item(self, item: dict[str, Any], line: int, timestamp: str | None) -> None:
        kind = item.get("type")
        role = item.get("role")
        if kind == "reasoning":
            self.stats.history["reasoning_dropped"] += 1
            return
        if kind == "message" and role == "assistant" or kind in ASSISTANT_ITEMS:
            self._assistant(item, line, timestamp)
            return
        if kind == "message" and role in ("user", "developer", "system"):
            self._close()
            text = content_text(item.get("content"))
            if role == "user":
                self.user_texts.append(text)
                self.echo, self.user_since_turn = None, True
            self._conv().items.append({"role": "user", "content": text})
        elif kind in OUTPUT_ITEMS:
            self._close()
            self.echo = None
            self._output(item)
        else:
            self.stats.skipped_records[f"codex.{kind}"] += 1   # ghost_snapshot, compaction, unknown

    def _assistant(self, item: dict[str, Any], line: int, timestamp: str | None) -> None:
        if self.echo is not None:   # the prompt was recorded only as a UI event (some builds)
            self.stats.history["codex_user_from_event"] += 1
            self.user_texts.append(self.echo)
            self._conv().items.append({"role": "user", "content": self.echo})
            self.echo = None
        if self.turn_start is None:
            self.turn_start = (line, timestamp, item.get("id"))
        if item.get("type") == "message":
            text = content_text(item.get("content"))
            if text:
                self.text.append(text)
            return
        call, parsed = tool_call(item, len(self.calls))
        if not parsed:
            self.stats.history["codex_unparsed_arguments"] += 1
        self.calls[call.id] = call
        self.turn_calls.append(call)

    def _close(self) -> None:
        """The response being read is complete: one Turn (and a stand-in result for a web search)."""
        if self.turn_start is None:
            return
        line, timestamp, item_id = self.turn_start
        action = Action(content="\n\n".join(self.text), tool_calls=self.turn_calls)
        conversation = self._conv()
        if action.content.strip() or action.tool_calls:
            key = next((c.id for c in action.tool_calls), None) or item_id or hashlib.sha1(
                f"{conversation.trace_id}|{timestamp}|{action.content}".encode()).hexdigest()
            meta = {"line": line, "timestamp": timestamp, "effort": self.effort}
            conversation.items.append(Turn(action, f"codex:{key}", self.model, meta))
            for call in action.tool_calls:
                if call.name == "web_search":
                    conversation.items.append({"role": "tool", "tool_call_id": call.id,
                                               "content": WEB_SEARCH_RESULT})
                    conversation.results[call.id] = result_outcome(call, "", None, _rules())
        else:
            self.stats.skipped_turns["no_text_or_tool_use"] += 1
        self.text, self.turn_calls, self.turn_start, self.user_since_turn = [], [], None, False

    def _output(self, item: dict[str, Any]) -> None:
        call_id = str(item.get("call_id") or "")
        text, success = output_text(item.get("output"))
        self._conv().items.append({"role": "tool", "tool_call_id": call_id, "content": text})
        call = self.calls.get(call_id)
        if call is not None:
            self._conv().results[call_id] = result_outcome(call, text, success, _rules())

    def _compacted(self, payload: dict[str, Any]) -> None:
        self._close()
        history = payload.get("replacement_history")
        if isinstance(history, list):
            messages = _replacement(history, self.stats)
        else:   # older builds: the user messages so far, then the summary, as a user message
            summary = str(payload.get("message") or "")
            messages = [{"role": "user", "content": t} for t in self.user_texts if t]
            if summary:
                messages.append({"role": "user", "content": summary})
        self._conv().items.append(Reset(messages))

    def _event(self, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        if kind == "user_message" and isinstance(payload.get("message"), str) and not self.user_since_turn:
            self.echo = payload["message"]
        elif kind == "turn_aborted":
            self._close()
            turns = self._conv().turns()
            if turns:
                turns[-1].aborted = True
        elif kind == "exec_command_end" and isinstance(payload.get("exit_code"), int):
            self.exit_codes[str(payload.get("call_id"))] = payload["exit_code"]
        elif kind == "patch_apply_end" and payload.get("success") is False:
            self.exit_codes[str(payload.get("call_id"))] = 1

    def _apply_exit_codes(self) -> None:
        """Exit codes the UI events recorded, for outputs whose text does not carry them."""
        results = self.conversation.results if self.conversation else {}
        for call_id, code in self.exit_codes.items():
            found = results.get(call_id)
            if found is not None and found["kind"] == "ok" and found["exit_code"] is None:
                results[call_id] = {**found, "exit_code": code, "kind": "error" if code else "ok"}


def _replacement(history: list[Any], stats: IngestStats) -> list[dict[str, Any]]:
    """The messages of a compaction's `replacement_history` (its own items, same conversion)."""
    messages: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None
    for index, item in enumerate(history):
        if not isinstance(item, dict):
            continue
        kind, role = item.get("type"), item.get("role")
        if kind == "reasoning" or kind in ("compaction", "compaction_summary", "ghost_snapshot"):
            stats.history["reasoning_dropped" if kind == "reasoning" else "codex_compaction_item"] += 1
            continue
        if kind == "message" and role == "assistant" or kind in ASSISTANT_ITEMS:
            if pending is None:
                pending = {"role": "assistant", "content": "", "tool_calls": []}
                messages.append(pending)
            if kind == "message":
                texts = (pending["content"], content_text(item.get("content")))
                pending["content"] = "\n\n".join(t for t in texts if t)
            else:
                pending["tool_calls"].append(tool_call(item, index)[0].to_openai())
            continue
        pending = None
        if kind == "message":
            messages.append({"role": "user", "content": content_text(item.get("content"))})
        elif kind in OUTPUT_ITEMS:
            messages.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                             "content": output_text(item.get("output"))[0]})
    for message in messages:
        if message.get("role") == "assistant" and not message.get("tool_calls"):
            message.pop("tool_calls", None)
    return messages
