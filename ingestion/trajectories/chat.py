"""OpenAI-style message lists (mini-swe-agent, SWE-agent's `history`, dataset rows) → a Conversation.

An assistant message acts through its `tool_calls`, or, in the text formats (mini-swe-agent-1,
SWE-agent without function calling, SWE-smith rows), through the last fenced block of its text: that
block becomes a `bash` tool call (`{"command": block}`) and the text around it stays the assistant's
content, so teachers answer in the same vocabulary. The user message that follows a text action is its
observation: it becomes the tool message answering the call, its `<returncode>` the call's exit code.
The trajectory's own system prompt is dropped (the state's system prompt is the synthetic one);
`reasoning_content` / `thinking` fields are never kept (counted).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from functools import lru_cache
from typing import Any

import orjson

from configs import config_path
from ingestion.codex.items import parse_arguments
from ingestion.linear import Conversation, Turn
from ingestion.outcome import call_outcome
from ingestion.schema import Action, ToolCall
from ingestion.stats import IngestStats

TEXT_TOOL = "bash"


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    rules = tomllib.loads(config_path("formats.toml").read_text(encoding="utf-8"))["trajectories"]
    return re.compile(rules["text_action"], re.DOTALL), re.compile(rules["returncode"])


def text_action(text: str) -> tuple[str, str | None]:
    """A text-format response split into what it shows and its command (the last fenced block).

    >>> text_action("THOUGHT: look\\n\\n```bash\\nls -la\\n```")
    ('THOUGHT: look', 'ls -la')
    >>> text_action("no block here")
    ('no block here', None)
    """
    found = list(_patterns()[0].finditer(text))
    if not found:
        return text, None
    last = found[-1]
    return (text[:last.start()] + text[last.end():]).strip(), last.group(1)


def exit_code(text: str, extra: Any = None) -> int | None:
    """The exit code an observation records (`extra.returncode`, else its `<returncode>` block).

    >>> exit_code("<returncode>2</returncode>\\n<output>x</output>"), exit_code("hi", {"returncode": 0})
    (2, 0)
    """
    if isinstance(extra, dict) and isinstance(extra.get("returncode"), int):
        return extra["returncode"]
    found = _patterns()[1].search(text[:300])
    return int(found.group(1)) if found else None


def content_text(value: Any) -> str:
    """Message content as text (a string, or parts with `text`).

    >>> content_text([{"type": "text", "text": "a"}, {"type": "image_url"}]), content_text(None)
    ('a', '')
    """
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def openai_calls(raw: Any, key: str, stats: IngestStats) -> list[ToolCall]:
    """OpenAI `tool_calls` (arguments a JSON string or an object) as ToolCalls; junk entries dropped."""
    calls = []
    for n, call in enumerate(raw if isinstance(raw, list) else ()):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            stats.history["trajectory_bad_tool_call"] += 1
            continue
        arguments, parsed = parse_arguments(function.get("arguments"))
        stats.history["trajectory_unparsed_arguments"] += not parsed
        calls.append(ToolCall(id=str(call.get("id") or f"{key}-{n}"), name=str(function["name"]),
                              arguments=arguments))
    return calls


class ChatBuilder:
    """Adds OpenAI-style messages to a conversation, one at a time, keeping the text-action state."""

    def __init__(self, conversation: Conversation, stats: IngestStats, model: str | None) -> None:
        self.conversation, self.stats, self.model = conversation, stats, model
        self.open_text_call: ToolCall | None = None     # a text action waiting for its observation
        self.names: dict[str, str] = {}
        # A call id met again (servers that number calls per response: `call_0` every turn) is renamed,
        # and the results after it answer the newest call of that id.
        self.current: dict[str, str] = {}

    def add(self, message: dict[str, Any], key: str, meta: dict[str, Any] | None = None) -> None:
        role = message.get("role")
        if role == "system":
            self.stats.history["trajectory_system_prompt_dropped"] += 1
        elif role == "assistant":
            self.assistant(message, key, meta or {})
        elif role == "tool":
            ids = message.get("tool_call_ids") or [message.get("tool_call_id")]
            for call_id in ids if isinstance(ids, list) else [ids]:
                self.result(str(call_id or ""), content_text(message.get("content")), message.get("extra"))
        elif role == "user":
            text = content_text(message.get("content"))
            if self.open_text_call is not None:
                self.result(self.open_text_call.id, text, message.get("extra"))
            elif text.strip():
                self.conversation.items.append({"role": "user", "content": text})
        else:
            self.stats.skipped_records[f"trajectory.role.{role}"] += 1

    def assistant(self, message: dict[str, Any], key: str, meta: dict[str, Any]) -> None:
        if message.get("reasoning_content") or message.get("thinking_blocks") or message.get("thinking"):
            self.stats.history["reasoning_dropped"] += 1
        text = content_text(message.get("content"))
        calls = openai_calls(message.get("tool_calls"), key, self.stats)
        self.open_text_call = None
        calls = [self._unique(call) for call in calls]
        if not calls:
            shown, command = text_action(text)
            if command is None and isinstance(message.get("action"), str) and message["action"].strip():
                shown, command = str(message.get("thought") or text), message["action"]
            if command is not None:
                text = shown
                calls = [ToolCall(id=f"{key}-{TEXT_TOOL}", name=TEXT_TOOL, arguments={"command": command})]
                self.open_text_call = calls[0]
        action = Action(content=text, tool_calls=calls)
        if not (action.content.strip() or action.tool_calls):
            self.stats.skipped_turns["no_text_or_tool_use"] += 1
            return
        self.names.update((c.id, c.name) for c in calls)
        model = message.get("model") if isinstance(message.get("model"), str) else self.model
        # The key dedups a response copied into another file; two trajectories that share an id (ATIF's
        # normalized session ids, a rerun) still differ by what they did.
        digest = hashlib.sha1(orjson.dumps(action.to_message(), default=str)).hexdigest()[:12]
        self.conversation.items.append(Turn(action, f"{key}:{digest}", model, meta))

    def _unique(self, call: ToolCall) -> ToolCall:
        if call.id not in self.current:
            self.current[call.id] = call.id
            return call
        self.stats.history["trajectory_reused_call_id"] += 1
        renamed = f"{call.id}~{len(self.conversation.items)}"
        self.current[call.id] = renamed
        return call.model_copy(update={"id": renamed})

    def result(self, call_id: str, text: str, extra: Any = None, failed: bool | None = None) -> None:
        """The observation of call `call_id`: a tool message, and the call's outcome."""
        call_id = self.current.get(call_id, call_id)
        if self.open_text_call is not None and call_id == self.open_text_call.id:
            self.open_text_call = None
        code = exit_code(text, extra)
        self.conversation.items.append({"role": "tool", "tool_call_id": call_id, "content": text})
        bad = failed if failed is not None else (code is not None and code != 0)
        self.conversation.results[call_id] = call_outcome(call_id, self.names.get(call_id, TEXT_TOOL),
                                                          "error" if bad else "ok",
                                                          text if bad else None, code)
