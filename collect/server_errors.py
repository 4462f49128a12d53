"""What a student server's error means, read from the error texts real servers send (pure).

Three errors change what a run does, so each is recognised by its own text, never by a loose match
(a 400 that merely mentions `logprobs` is not a server without logprobs: vLLM 0.10's validation errors
echo the whole request body, extension included):

- a context overflow, the student's own failure: vLLM 0.10 "This model's maximum context length is N
  tokens. However, your request has M input tokens" or "'max_tokens' or 'max_completion_tokens' is too
  large", vLLM 0.33 "... However, your prompt contains M input tokens", OpenAI `context_length_exceeded`,
  Anthropic "prompt is too long" (litellm raises ContextWindowExceededError for those it knows);
- a server that does not take the token extension: OpenAI "Unrecognized request argument supplied: X",
  an error whose `param` is X, or `transformers serve`'s 422 "Unexpected fields in the request: {'X'}"
  (the set of every field it does not know, transformers/cli/serving/utils.py `_validate_request`;
  vLLM itself ignores unknown fields, it never refuses them);
- a vLLM started without `--enable-auto-tool-choice` (0.10 and older refuse `tool_choice: auto`).
"""

from __future__ import annotations

import json
import re
from typing import Any

EXTENSION_KEYS = ("return_token_ids", "logprobs", "top_logprobs")

_OVERFLOW = re.compile(
    r"maximum context length is \d+ tokens"
    r"|'max_tokens' or 'max_completion_tokens' is too large"
    r"|context_length_exceeded"
    r"|prompt is too long"
    r"|input length \(\d+\) exceeds model's maximum context length", re.IGNORECASE)
_UNSUPPORTED = re.compile(
    r"(?:Unrecognized request argument supplied|Unknown parameter|Unsupported parameter"
    r"|unexpected keyword argument|Extra inputs are not permitted)[:\s'\"`]*(?P<key>\w+)", re.IGNORECASE)
_UNEXPECTED_SET = re.compile(r"Unexpected fields in the request: \{(?P<keys>[^}]*)\}")
_AUTO_TOOL_CHOICE = re.compile(r"\"?auto\"? tool choice requires --enable-auto-tool-choice", re.IGNORECASE)


def error_fields(body: Any) -> tuple[str, str | None]:
    """(message, param) of an error body: OpenAI / vLLM `{"error": {...}}`, or the text itself.

    >>> error_fields({"error": {"message": "bad", "type": "BadRequestError", "param": "logprobs"}})
    ('bad', 'logprobs')
    >>> error_fields('{"message": "flat", "param": null}'), error_fields("plain text")
    (('flat', None), ('plain text', None))
    """
    if isinstance(body, str | bytes):
        try:
            body = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return (body.decode(errors="replace") if isinstance(body, bytes) else body), None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if isinstance(body, dict):
        param = body.get("param")
        message = str(body.get("message") or body.get("detail") or body)
        return message, param if isinstance(param, str) else None
    return str(body), None


def is_context_overflow(message: str) -> bool:
    """The request does not fit the model's context.

    >>> is_context_overflow("This model's maximum context length is 4096 tokens. However, your prompt "
    ...                     "contains 5000 input tokens, which exceeds this limit even without any output.")
    True
    >>> is_context_overflow("prompt is too long: 210000 tokens > 200000 maximum")
    True
    >>> is_context_overflow("1 validation error: {'input': {'max_tokens': 10, 'logprobs': True}}")
    False
    """
    return bool(_OVERFLOW.search(message))


def unsupported_extension(message: str, param: str | None) -> str | None:
    """The token-extension field the server refused, or None.

    >>> unsupported_extension("Unrecognized request argument supplied: return_token_ids", None)
    'return_token_ids'
    >>> unsupported_extension("logprobs is not allowed here", "logprobs")
    'logprobs'
    >>> unsupported_extension("Unrecognized request argument supplied: reasoning_effort", None) is None
    True
    >>> unsupported_extension("1 validation error: {'input': {'logprobs': True, 'return_token_ids': True}}",
    ...                       None) is None
    True
    >>> unsupported_extension("Unexpected fields in the request: {'return_token_ids'}", None)
    'return_token_ids'
    """
    if param in EXTENSION_KEYS:
        return param
    if found := _UNEXPECTED_SET.search(message):
        keys = re.findall(r"'(\w+)'", found.group("keys"))
        return next((key for key in keys if key in EXTENSION_KEYS), None)
    match = _UNSUPPORTED.search(message)
    return match.group("key") if match and match.group("key") in EXTENSION_KEYS else None


def needs_auto_tool_choice(message: str) -> bool:
    """vLLM 0.10 refusing `tool_choice: auto` because it was started without a tool-call parser.

    >>> needs_auto_tool_choice('"auto" tool choice requires --enable-auto-tool-choice and '
    ...                        '--tool-call-parser to be set')
    True
    """
    return bool(_AUTO_TOOL_CHOICE.search(message))
