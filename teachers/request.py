"""The exact request a teacher receives for a state: its messages in OpenAI wire form, and tools.

States arrive redacted: `replay.pipeline` redacts each state once, right after ingestion
(`teachers.redact_state`), so what a teacher receives is exactly what every output holds.
"""

from __future__ import annotations

import hashlib
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
