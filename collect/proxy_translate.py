"""Anthropic Messages ⇄ OpenAI chat completions for the recording proxy, through litellm's adapter.

From litellm (`litellm.llms.anthropic.pass_through`), the layer litellm's own proxy puts in front of
non-Anthropic providers for `/v1/messages`:
- `AnthropicAdapter` maps a Messages request to an OpenAI one (system blocks, text / image /
  tool_use / tool_result blocks, tools, tool_choice, stop sequences) and an OpenAI response back
  (text, tool calls, reasoning → thinking, finish reason → stop_reason, usage);
- `FakeAnthropicMessagesStreamIterator` turns a complete Messages response into the SSE events of a
  stream (message_start, content_block_start/delta/stop, message_delta, message_stop).
Ours: which keys reach the backend (a whitelist: Anthropic-only knobs such as `thinking`,
`context_management`, `metadata` or `max_tokens: 32000` mean nothing, or harm, on a vLLM server),
the ids the CLI gets back, and what counts as a side request.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

FORWARDED = ("messages", "tools", "tool_choice", "stop")
ANTHROPIC_ONLY_MESSAGE_KEYS = ("thinking_blocks", "cache_control")
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}


def _adapter() -> Any:
    # litellm fetches its cost map from GitHub on import unless told not to: seconds of retries offline.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from litellm.llms.anthropic.pass_through.adapters.transformation import AnthropicAdapter

    return AnthropicAdapter()


def warm_up() -> None:
    """Import litellm now (seconds), not on the first request."""
    _adapter()


def _plain(value: Any) -> Any:
    """litellm returns TypedDicts and pydantic objects; the records and the wire want plain JSON."""
    return orjson.loads(orjson.dumps(value, default=lambda o: o.model_dump() if hasattr(o, "model_dump")
                                     else str(o)))


def _clean_message(message: dict[str, Any]) -> dict[str, Any]:
    """One translated message without Anthropic-only keys.

    >>> _clean_message({"role": "assistant", "content": "x", "thinking_blocks": [{"signature": "s"}]})
    {'role': 'assistant', 'content': 'x'}
    """
    return {key: value for key, value in message.items() if key not in ANTHROPIC_ONLY_MESSAGE_KEYS}


def as_served(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool with its keys in the order vLLM renders them: the server reads each tool into its own model
    (`type`, then `function`: `name`, `description`, `parameters`) and renders that, so a request recorded
    in another order (litellm's adapter writes `parameters` first) would not render to its prompt's ids.

    >>> as_served({"function": {"parameters": {}, "name": "a", "description": "d"}, "type": "function"})
    {'type': 'function', 'function': {'name': 'a', 'description': 'd', 'parameters': {}}}
    """
    function = tool.get("function")
    if not isinstance(function, dict):
        return tool
    ordered = {key: function[key] for key in ("name", "description", "parameters") if key in function}
    rest = {key: value for key, value in tool.items() if key not in ("type", "function")}
    return {"type": tool.get("type", "function"), "function": ordered | function, **rest}


def to_openai(body: dict[str, Any], backend_model: str,
              sampling: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A Messages request → (the OpenAI request for `backend_model`, litellm's tool-name mapping).

    `sampling` (the run's --temperature / --max-tokens) replaces whatever the CLI asked for.
    """
    # The adapter pops keys from what it is given, and makes per-model decisions (cache_control, reasoning
    # effort) from the model name: it gets a copy, named after the backend.
    translated, tool_map = _adapter().translate_completion_input_params_with_tool_mapping(
        {**body, "model": backend_model}, custom_llm_provider="hosted_vllm")
    translated = _plain(translated)
    request: dict[str, Any] = {"model": backend_model}
    for key in FORWARDED:
        if translated.get(key):
            request[key] = translated[key]
    request["messages"] = [_clean_message(m) for m in request.get("messages", [])]
    if "tools" in request:
        request["tools"] = [as_served(tool) for tool in request["tools"]]
    if "tools" not in request:
        request.pop("tool_choice", None)   # OpenAI servers reject a tool_choice without tools
    request.update(sampling)
    return request, tool_map


def to_anthropic(completion: dict[str, Any], tool_map: dict[str, str], message_id: str,
                 model: str) -> dict[str, Any]:
    """An OpenAI chat.completion body → the Messages response the CLI gets (id and model ours)."""
    from litellm import ModelResponse

    adapter = _adapter()
    # Only what the translation reads: litellm validates vLLM's extra fields (logprobs, token_ids) strictly
    # and they are recorded apart anyway.
    choices = [{key: choice.get(key) for key in ("index", "message", "finish_reason")}
               for choice in completion.get("choices") or []]
    fields = {key: completion[key] for key in ("id", "created", "model", "object", "usage")
              if key in completion}
    message = _plain(adapter.translate_completion_output_params(ModelResponse(**fields, choices=choices),
                                                                tool_map))
    # litellm writes an empty text block before tool calls that came with `content: ""`; empty text and
    # thinking blocks are noise in the session (and the Messages API itself never returns them).
    blocks = message.get("content") or []
    kept = [block for block in blocks if block.get("type") not in ("text", "thinking")
            or block.get(block["type"])]
    message["content"] = kept or blocks[:1]
    message.update(id=message_id, model=model)
    message.pop("stop_details", None)
    return message


def with_reasoning_content(completion: dict[str, Any], reasoning: str | None) -> dict[str, Any]:
    """The completion with its reasoning as `reasoning_content`, the one name the adapter maps to a
    thinking block (vLLM 0.12+ answers `reasoning`).

    >>> body = {"choices": [{"message": {"role": "assistant", "content": "x", "reasoning": "r"}}]}
    >>> with_reasoning_content(body, "r")["choices"][0]["message"]
    {'role': 'assistant', 'content': 'x', 'reasoning_content': 'r'}
    """
    choices = [dict(choice) for choice in completion.get("choices") or []]
    if choices and isinstance(choices[0].get("message"), dict):
        message = {key: value for key, value in choices[0]["message"].items()
                   if key not in ("reasoning", "reasoning_content")}
        if reasoning:
            message["reasoning_content"] = reasoning
        choices[0]["message"] = message
    return {**completion, "choices": choices}


def restore_calls(messages: list[dict[str, Any]], generated: dict[str, str]) -> list[dict[str, Any]]:
    """The history with each tool call's arguments as the student generated them (by call id): the CLI
    writes its own copy back (Edit gains `replace_all: false`, keys move), and the next prompt would no
    longer extend the previous prompt + completion.

    >>> history = [{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
    ...     "function": {"name": "Edit", "arguments": '{"replace_all": false, "old_string": "a"}'}}]}]
    >>> restore_calls(history, {"c1": '{"old_string": "a"}'})[0]["tool_calls"][0]["function"]["arguments"]
    '{"old_string": "a"}'
    """
    out = []
    for message in messages:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if calls and any(call.get("id") in generated for call in calls):
            calls = [{**call, "function": {**call["function"], "arguments": generated[call["id"]]}}
                     if call.get("id") in generated else call for call in calls]
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


def sse_events(message: dict[str, Any]) -> list[bytes]:
    """The Messages response as the SSE events of a stream, one bytes object per event."""
    _adapter()
    from litellm.llms.anthropic.pass_through.messages.fake_stream_iterator import (
        FakeAnthropicMessagesStreamIterator,
    )

    return list(FakeAnthropicMessagesStreamIterator(message))  # type: ignore[arg-type]


def classify(model: str, body: dict[str, Any], main_models: frozenset[str]) -> tuple[str, str | None]:
    """main (a turn of the student) or side, and why side.

    >>> classify("big", {"tools": [{}]}, frozenset({"big"})), classify("small", {}, frozenset({"big"}))
    (('main', None), ('side', 'small_model'))
    >>> classify("big", {"tools": []}, frozenset({"big"}))
    ('side', 'no_tools')
    """
    if model not in main_models:
        return "side", "small_model"
    if not body.get("tools"):
        return "side", "no_tools"   # titles, summaries, compaction: the agent loop always offers tools
    return "main", None


def error_body(status: int, message: str) -> dict[str, Any]:
    """An Anthropic error body.

    >>> error_body(502, "down")
    {'type': 'error', 'error': {'type': 'api_error', 'message': 'down'}}
    """
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def estimate_tokens(body: dict[str, Any]) -> int:
    """count_tokens without a tokenizer: a char estimate is all the CLI uses it for.

    >>> estimate_tokens({"messages": [{"role": "user", "content": "hello world"}]})
    10
    """
    size = len(orjson.dumps(body.get("messages") or [])) + len(orjson.dumps(body.get("tools") or []))
    return max(1, size // 4)
