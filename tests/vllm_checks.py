"""What vLLM 0.33 refuses in a chat request, and the words it refuses it with, for tests/vllm_server.py.

Written from 0.33.0's source and held against the real server (vLLM's CPU build 0.32.0, which answers the
same: bench/vllm_standin_diff.py): FastAPI's validation of the request body (`serve/exception_handling/
handlers/validation.py`: "N validation errors:" and each error's dict, `input` summarised, `param` the
first error's cleaned `loc`), the request's `mode="before"` validators (`chat_completion/protocol.py`),
the model check (`serve/engine/serving.py`), the empty conversation, and `SamplingParams._verify_args`
(a `VLLMValidationError`'s text ends in "(parameter=P, value=V)").
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.llm_server import Reply

NOT_INT = "Input should be a valid integer, unable to parse string as an integer"
FRACTION = "Input should be a valid integer, got a number with a fractional part"
NOT_FLOAT = "Input should be a valid number, unable to parse string as a number"
INTS = ("max_tokens", "max_completion_tokens", "n", "seed")
FLOATS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
# The union vLLM reads a message as (ChatCompletionMessageParam), branch by branch.
BRANCHES = ("ChatCompletionDeveloperMessageParam", "ChatCompletionSystemMessageParam",
            "ChatCompletionUserMessageParam", "ChatCompletionAssistantMessageParam",
            "ChatCompletionToolMessageParam", "ChatCompletionFunctionMessageParam",
            "CustomChatCompletionMessageParam")


def error(message: str, kind: str = "BadRequestError", code: int = 400, param: str | None = None) -> Reply:
    """vLLM's ErrorResponse: `{"error": {message, type, param, code}}`, status = code."""
    return Reply({"error": {"message": message, "type": kind, "param": param, "code": code}}, status=code)


def sanitize(message: str) -> str:
    """create_error_response's `sanitize_message`: file paths become <path>.

    >>> sanitize("No adapter found for /tmp/lora")
    'No adapter found for <path>'
    """
    message = re.sub(r"/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:/[\w.\-]+)+", "<path>", message)
    return re.sub(r"(?:/[\w\-]+)+/[\w\-]+\.\w+", "<path>", message).strip()


def invalid(message: str, parameter: str | None = None, value: Any = None) -> Reply:
    """A `VLLMValidationError` as create_error_response words it.

    >>> invalid("top_p must be in (0, 1], got 2.0.", "top_p", 2.0).body["error"]["message"]
    'top_p must be in (0, 1], got 2.0. (parameter=top_p, value=2.0)'
    """
    extras = [f"{key}={item}" for key, item in (("parameter", parameter), ("value", value))
              if item is not None]
    return error(f"{message} ({', '.join(extras)})" if extras else message, param=parameter)


def summary(value: Any) -> str:
    """A validation error's `input` as vLLM shows it (`_summarize_error_input`).

    >>> summary({"a": 1}), summary("hot"), summary(1.5)
    ('<dict of 1 items>', 'hot', '1.5')
    """
    if isinstance(value, list | tuple | set | frozenset | dict):
        return f"<{type(value).__name__} of {len(value)} items>"
    text = str(value)
    return text[:200] + "...[truncated]" if len(text) > 200 else text


def validation_errors(errors: list[dict[str, Any]]) -> Reply:
    """FastAPI's RequestValidationError as vLLM's handler answers it (at most 10 errors shown)."""
    label = "error" if len(errors) == 1 else "errors"
    message = f"{len(errors)} validation {label}:\n" + "".join(f"  {item}\n" for item in errors[:10])
    if len(errors) > 10:
        message += f"  ...and {len(errors) - 10} more {label}\n"
    return error(message.rstrip(), "Bad Request", param=errors[0]["loc"])


def not_json(bad: json.JSONDecodeError) -> Reply:
    """A body that is not JSON: FastAPI's json_invalid error, located at the character it stopped at."""
    return validation_errors([{"type": "json_invalid", "loc": f"body.{bad.pos}", "msg": "JSON decode error",
                               "input": "<dict of 0 items>", "ctx": {"error": bad.msg}}])


def _field(kind: str, loc: str, msg: str, value: Any) -> dict[str, Any]:
    return {"type": kind, "loc": loc, "msg": msg, "input": summary(value)}


def _message_errors(index: int, message: Any) -> list[dict[str, Any]]:
    loc = f"body.messages.{index}"
    if not isinstance(message, dict):
        return [*(_field("dict_type", f"{loc}.{b}", "Input should be a valid dictionary", message)
                  for b in BRANCHES),
                _field("model_attributes_type", f"{loc}.Message",
                       "Input should be a valid dictionary or object to extract fields from", message)]
    if "role" in message:
        return []               # any role is taken (CustomChatCompletionMessageParam)
    missing = [(b, "role") for b in BRANCHES[:5]] + [(BRANCHES[4], "tool_call_id"), (BRANCHES[5], "name"),
                                                     (BRANCHES[5], "role"), (BRANCHES[6], "role"),
                                                     ("Message", "author"), ("Message", "content")]
    return [_field("missing", f"{loc}.{branch}.{name}", "Field required", message)
            for branch, name in missing]


def body_errors(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The request body's type errors, in field order (messages first)."""
    found: list[dict[str, Any]] = []
    messages = request.get("messages")
    if "messages" not in request:
        found.append(_field("missing", "body.messages", "Field required", request))
    elif not isinstance(messages, list):
        found.append(_field("list_type", "body.messages", "Input should be a valid list", messages))
    else:
        for index, message in enumerate(messages):
            found += _message_errors(index, message)
    for name in INTS:
        value = request.get(name)
        if isinstance(value, str) and not value.strip().lstrip("-").isdigit():
            found.append(_field("int_parsing", f"body.{name}", NOT_INT, value))
        elif isinstance(value, float) and not value.is_integer():
            found.append(_field("int_from_float", f"body.{name}", FRACTION, value))
    for name in FLOATS:
        value = request.get(name)
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                found.append(_field("float_parsing", f"body.{name}", NOT_FLOAT, value))
    return found


def before_validators(request: dict[str, Any]) -> Reply | None:
    """ChatCompletionRequest's `mode="before"` validators: logprobs, stream options, tool use."""
    if request.get("stream_options") and not request.get("stream"):
        return invalid("Stream options can only be defined when `stream=True`.", "stream_options")
    top = request.get("top_logprobs")
    if top is not None and (top == -1 or top > 0) and not request.get("logprobs"):
        return invalid("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs")
    if top is not None and top < 0 and top != -1:
        return invalid("`top_logprobs` must be a positive value or -1.", "top_logprobs", top)
    tools, choice = request.get("tools"), request.get("tool_choice")
    if tools == []:
        return invalid("`tools` must not be an empty array. Either provide at least one tool or omit the "
                       "field entirely.", "tools")
    if choice is None or choice == "none":
        return None
    if tools is None:
        return invalid("When using `tool_choice`, `tools` must be set.", "tool_choice")
    if choice not in ("auto", "required") and not isinstance(choice, dict):
        return invalid(f"Invalid value for `tool_choice`: {choice}! Only named tools, \"none\", \"auto\" or "
                       "\"required\" are supported.", "tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        if not any(tool.get("function", {}).get("name") == name for tool in tools):
            return invalid("The tool specified in `tool_choice` does not match any of the specified `tools`",
                           "tool_choice")
    return None


def sampling_errors(request: dict[str, Any], max_tokens: int, max_logprobs: int = 20) -> Reply | None:
    """SamplingParams._verify_args on the request and the max_tokens the server settled on (the engine's
    logprobs cap after), in that order."""
    n = request.get("n")
    if n is not None and n < 1:
        return invalid(f"n must be at least 1, got {n}.")
    if request.get("temperature") is not None:
        heat = float(request["temperature"])
        if heat < 0:
            return invalid(f"temperature must be non-negative, got {heat}.", "temperature", heat)
        if heat > 2:
            return invalid(f"temperature must be in [0, 2], got {heat}.", "temperature", heat)
    top_p = request.get("top_p")
    if top_p is not None and not 0 < float(top_p) <= 1:
        return invalid(f"top_p must be in (0, 1], got {float(top_p)}.", "top_p", float(top_p))
    if max_tokens < 1:
        return invalid(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens)
    top = request.get("top_logprobs")
    if request.get("logprobs") and top is not None and top > max_logprobs:
        return invalid(f"Requested sample logprobs of {top}, which is greater than max allowed: "
                       f"{max_logprobs}", "logprobs", top)
    return None
