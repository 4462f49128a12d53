"""The exact request a teacher receives for a state: redacted messages in OpenAI wire form, and tools."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from ingestion.schema import TraceState
from teachers.redact import redact_messages


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


def build_request(state: TraceState, redact: bool = True
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Counter[str]]:
    """(messages, tools, redactions) for a state. Redaction runs before arguments become JSON strings,
    so a multi-line secret inside an argument is still multi-line text when it is searched.

    >>> from ingestion.schema import Action
    >>> state = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", student_action=Action(),
    ...                    messages=[{"role": "user", "content": "key sk-ant-" + "x" * 30}])
    >>> build_request(state)[0][0]["content"], build_request(state)[2]
    ('key [REDACTED:anthropic_key]', Counter({'anthropic_key': 1}))
    """
    messages: list[dict[str, Any]] = state.messages
    counts: Counter[str] = Counter()
    if redact:
        messages, counts = redact_messages(messages)
    return to_api_messages(messages), list(state.tools), counts
