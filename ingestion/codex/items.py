"""Codex CLI response items (codex-rs/protocol `ResponseItem`) → OpenAI messages and tool calls. Pure.

- `message`: user / developer text → a user message (developer instructions are the CLI's own
  context, sent to the model as input; chat templates have no mid-conversation developer role);
  assistant text → part of the turn. `input_image` → `[image]`.
- `reasoning` (summaries and `encrypted_content`): dropped — never sent, never kept.
- `function_call` (JSON `arguments`), `custom_tool_call` (freeform `input`, e.g. `apply_patch` →
  `{"input": patch}`), `local_shell_call` (`action.command` argv) and `web_search_call` (`action.query`;
  the search runs on OpenAI's side and its results are not recorded) → tool calls.
- `function_call_output` / `custom_tool_call_output` → tool messages (output text as the model saw it).
- `ghost_snapshot`, `compaction`, `compaction_summary` and unknown types: dropped, counted by type.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ingestion.outcome import call_outcome
from ingestion.schema import ToolCall

ASSISTANT_ITEMS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
OUTPUT_ITEMS = {"function_call_output", "custom_tool_call_output"}
WEB_SEARCH_RESULT = "[web search ran on the provider's side; its results were not recorded]"
_EXIT_TEXT = re.compile(r"(?:Exit code|Process exited with code):? (-?\d+)")


def content_text(content: Any) -> str:
    """The text of a message's content items (`input_text`, `output_text`, images as `[image]`).

    >>> content_text([{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "x"}])
    'a\\n[image]'
    >>> content_text("plain")
    'plain'
    """
    if isinstance(content, str):
        return content
    parts = []
    for item in content if isinstance(content, list) else ():
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("text"), str):
            parts.append(item["text"])
        elif item.get("type") in ("input_image", "output_image"):
            parts.append("[image]")
    return "\n".join(parts)


def parse_arguments(raw: Any) -> tuple[dict[str, Any], bool]:
    """A function call's arguments as an object, and whether they parsed; text that is no JSON object
    is kept whole as `{"input": text}`.

    >>> parse_arguments('{"cmd": "ls"}'), parse_arguments("not json")
    (({'cmd': 'ls'}, True), ({'input': 'not json'}, False))
    """
    if isinstance(raw, dict):
        return raw, True
    if isinstance(raw, str):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {"input": raw}, False
        if isinstance(value, dict):
            return value, True
        return {"input": raw}, False
    return {}, raw is None


def tool_call(item: dict[str, Any], index: int) -> tuple[ToolCall, bool]:
    """The tool call of an assistant-side item (and whether its arguments parsed); `index` names a
    call whose item has no id.

    >>> tool_call({"type": "custom_tool_call", "name": "apply_patch", "input": "*** B", "call_id": "c"}, 0)
    (ToolCall(id='c', name='apply_patch', arguments={'input': '*** B'}), True)
    >>> shell = {"type": "local_shell_call", "call_id": "s", "action": {"type": "exec", "command": ["ls"]}}
    >>> tool_call(shell, 0)[0].name
    'local_shell'
    """
    kind = item.get("type")
    call_id = str(item.get("call_id") or item.get("id") or f"call_{index}")
    if kind == "custom_tool_call":
        return ToolCall(id=call_id, name=str(item.get("name") or "custom"),
                        arguments={"input": item.get("input") or ""}), True
    if kind == "local_shell_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        arguments = {k: v for k, v in action.items() if k != "type" and v is not None}
        return ToolCall(id=call_id, name="local_shell", arguments=arguments), True
    if kind == "web_search_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        query = action.get("query") or " ".join(action.get("queries") or []) or ""
        return ToolCall(id=call_id, name="web_search", arguments={"query": query}), True
    arguments, parsed = parse_arguments(item.get("arguments"))
    return ToolCall(id=call_id, name=str(item.get("name") or "function"), arguments=arguments), parsed


def output_text(output: Any) -> tuple[str, bool | None]:
    """A tool output as the text the model saw, and its `success` flag where recorded.

    >>> output_text("ok"), output_text({"content": "no", "success": False})
    (('ok', None), ('no', False))
    >>> output_text([{"type": "output_text", "text": "Done!"}])
    ('Done!', None)
    """
    if isinstance(output, str):
        return output, None
    if isinstance(output, dict):
        success = output.get("success")
        return content_text(output.get("content") or output.get("output") or ""), \
            success if isinstance(success, bool) else None
    return content_text(output), None


def exit_code(text: str) -> int | None:
    """The exit code a shell tool's output reports: the older JSON `{"output", "metadata": {"exit_code"}}`
    or the text header (`Exit code: 1`, `Process exited with code 1`).

    >>> exit_code('{"output": "x", "metadata": {"exit_code": 2, "duration_seconds": 0.1}}')
    2
    >>> exit_code("Exit code: 0\\nWall time: 1 seconds\\nOutput:\\nok"), exit_code("hello")
    (0, None)
    """
    if text.startswith("{") and '"exit_code"' in text:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("metadata"), dict):
            code = value["metadata"].get("exit_code")
            return code if isinstance(code, int) else None
    found = _EXIT_TEXT.search(text[:300])
    return int(found.group(1)) if found else None


def result_outcome(call: ToolCall, text: str, success: bool | None, rules: dict[str, Any]) -> dict[str, Any]:
    """A call's outcome from its output: rejected / interrupted by the texts in `rules`
    (configs/agent_outcomes.toml), else error on a non-zero exit code or `success: false`, else ok.

    >>> rules = {"rejected": ["rejected by user"], "interrupted": ["aborted"]}
    >>> call = ToolCall(id="c", name="shell")
    >>> result_outcome(call, "Exit code: 1\\nOutput:\\nboom", None, rules)["kind"]
    'error'
    >>> result_outcome(call, "exec command rejected by user", None, rules)["kind"]
    'rejected'
    """
    head = text[:300].casefold()
    code = exit_code(text)
    if any(p in head for p in rules.get("rejected", ())):
        return call_outcome(call.id, call.name, "rejected", text)
    if head.strip() in rules.get("interrupted", ()):
        return call_outcome(call.id, call.name, "interrupted", text)
    failed = success is False or (code is not None and code != 0)
    return call_outcome(call.id, call.name, "error" if failed else "ok", text if failed else None, code)
