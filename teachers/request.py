"""The exact request a teacher receives for a state: redacted messages in OpenAI wire form, and tools."""

from __future__ import annotations

import hashlib
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


# Anthropic caches only at breakpoints: the system prompt (tools + system, shared by a whole trace) and
# the latest message (everything so far, which the trace's next request extends). litellm turns these
# into `cache_control` blocks for anthropic/, bedrock/ and vertex_ai/ Claude models.
BREAKPOINTS = ({"location": "message", "role": "system"}, {"location": "message", "index": -1})


def _explicit_cache(model: str) -> bool:
    try:
        from litellm.llms.anthropic.common_utils import supports_anthropic_cache_control

        return bool(supports_anthropic_cache_control(model, None))
    except Exception:  # an unroutable name: no breakpoints
        return False


def call_options(model: str, api_base: str | None, trace_id: str) -> dict[str, Any]:
    """litellm options that let the provider's prompt cache serve a trace's next request: never part of
    the response cache key (they do not change the answer).

    Anthropic-family models get `cache_control` breakpoints; OpenAI's own API gets a `prompt_cache_key`
    per trace (a hash, never the session id), which keeps a trace's requests on the machine that holds
    its prefix.

    >>> call_options("anthropic/claude-sonnet-4-6", None, "t")["cache_control_injection_points"][0]["role"]
    'system'
    >>> sorted(call_options("gpt-5", None, "t")), call_options("openai/m", "http://127.0.0.1:1/v1", "t")
    (['prompt_cache_key'], {})
    """
    from teachers.llm import load_litellm

    if _explicit_cache(model):
        return {"cache_control_injection_points": [dict(point) for point in BREAKPOINTS]}
    try:
        provider = load_litellm().get_llm_provider(model)[1]
    except Exception:  # not a litellm model string
        return {}
    if provider == "openai" and not api_base:
        digest = hashlib.sha256(f"teacher-replay:{trace_id}".encode()).hexdigest()[:32]
        return {"prompt_cache_key": f"trace-{digest}"}
    return {}
