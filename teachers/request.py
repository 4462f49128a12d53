"""The exact request a teacher receives for a state: its messages in OpenAI wire form, and tools.

States arrive redacted: `replay.pipeline` redacts each state once, right after ingestion
(`teachers.redact_state`), so what a teacher receives is exactly what every output holds.
"""

from __future__ import annotations

import json
from typing import Any

from ingestion.schema import TraceState


def _wire_call(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    if not isinstance(function.get("arguments"), str):
        function["arguments"] = json.dumps(function.get("arguments") or {}, ensure_ascii=False)
    return {**call, "type": call.get("type") or "function", "function": function}


def to_api_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the chat API wants them: tool-call arguments as JSON strings (states keep objects).

    >>> msg = {"role": "assistant", "content": "", "tool_calls": [
    ...     {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": {"command": "ls"}}}]}
    >>> to_api_messages([msg])[0]["tool_calls"][0]["function"]["arguments"]
    '{"command": "ls"}'
    """
    return [{**m, "tool_calls": [_wire_call(c) for c in m["tool_calls"]]} if m.get("tool_calls") else m
            for m in messages]


def build_request(state: TraceState) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) for a state, as sent.

    >>> from ingestion.schema import Action
    >>> state = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", student_action=Action(),
    ...                    messages=[{"role": "user", "content": "hi"}])
    >>> build_request(state)
    ([{'role': 'user', 'content': 'hi'}], [])
    """
    return to_api_messages(state.messages), list(state.tools)
