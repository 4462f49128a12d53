"""The student: one chat completion per turn through the OpenAI client, with vLLM's token extension.

vLLM (>= 0.10.2) answers `return_token_ids: true` with `prompt_token_ids` at the top level of the
response and `token_ids` in each choice; `logprobs: true` gives `choices[i].logprobs.content[]`.
A server that rejects the extension is asked again without it, once per run, and turns record None.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from collect.config import CollectConfig

EXTENSION_KEYS = ("return_token_ids", "logprobs", "top_logprobs")


class StudentError(Exception):
    """The student could not answer (unreachable, HTTP error, malformed response)."""


@dataclass
class StudentReply:
    message: dict[str, Any]                    # role, content, tool_calls: what goes back into the history
    reasoning: str | None = None
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    tokens: list[str] | None = None
    usage: dict[str, Any] | None = None
    elapsed_s: float = 0.0


def _int_list(value: Any) -> list[int] | None:
    ok = isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
    return value if ok else None


def _tool_calls(raw: Any) -> list[dict[str, Any]]:
    calls = []
    for index, call in enumerate(raw if isinstance(raw, list) else []):
        function = (call or {}).get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):     # some servers send an object; the wire form is a string
            arguments = json.dumps(arguments if arguments is not None else {})
        calls.append({"id": call.get("id") or f"call_{index}", "type": "function",
                      "function": {"name": function.get("name") or "", "arguments": arguments}})
    return calls


def parse_completion(body: dict[str, Any]) -> StudentReply:
    """The first choice of a chat.completion body, with vLLM's token ids and logprobs where present.

    >>> reply = parse_completion({"choices": [{"message": {"role": "assistant", "content": "hi"},
    ...     "token_ids": [7], "logprobs": {"content": [{"token": "hi", "logprob": -0.5}]}}],
    ...     "prompt_token_ids": [1, 2]})
    >>> reply.message, reply.prompt_token_ids, reply.completion_token_ids, reply.logprobs
    ({'role': 'assistant', 'content': 'hi'}, [1, 2], [7], [-0.5])
    """
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        raise StudentError(f"the response has no choice with a message: {str(body)[:200]}")
    choice, raw = choices[0], choices[0]["message"]
    content = raw.get("content")
    message: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else ""}
    calls = _tool_calls(raw.get("tool_calls"))
    if calls:
        message["tool_calls"] = calls
    entries = (choice.get("logprobs") or {}).get("content")
    entries = entries if isinstance(entries, list) and all(isinstance(e, dict) for e in entries) else None
    logprobs = [e.get("logprob") for e in entries] if entries else None
    if logprobs is not None and not all(isinstance(lp, int | float) for lp in logprobs):
        logprobs = None
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    return StudentReply(
        message=message, reasoning=reasoning if isinstance(reasoning, str) else None,
        finish_reason=choice.get("finish_reason"),
        prompt_token_ids=_int_list(body.get("prompt_token_ids")),
        completion_token_ids=_int_list(choice.get("token_ids")),
        logprobs=logprobs, tokens=[str(e.get("token")) for e in entries] if logprobs and entries else None,
        usage=body.get("usage") if isinstance(body.get("usage"), dict) else None)


class Student:
    """One per run, shared by the workers (the OpenAI client is thread-safe)."""

    def __init__(self, config: CollectConfig) -> None:
        from openai import OpenAI

        # The client's own retry policy (2 retries, honouring Retry-After, on connection errors, 408,
        # 409, 429 and 5xx) is the only one: an unreachable server fails in seconds, not minutes.
        self.client = OpenAI(base_url=config.student_url, api_key=config.api_key,
                             timeout=config.request_timeout, max_retries=2)
        self.model = config.student_model
        self.sampling = {key: value for key, value in
                         (("temperature", config.temperature), ("max_tokens", config.max_tokens))
                         if value is not None}
        self.extension = True

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> StudentReply:
        import openai

        started = time.monotonic()
        while True:
            extension = self.extension
            extra = {"logprobs": True, "extra_body": {"return_token_ids": True}} if extension else {}
            try:
                raw = self.client.chat.completions.with_raw_response.create(
                    model=self.model, messages=messages, tools=tools, tool_choice="auto",  # type: ignore[arg-type]
                    **self.sampling, **extra)
                body = json.loads(raw.text)
                break
            except openai.BadRequestError as exc:
                if extension and any(key in str(exc) for key in EXTENSION_KEYS):
                    self.extension = False     # a server without the extension: ask again, plainly
                    continue
                raise StudentError(f"the student rejected the request: {_short(exc)}") from None
            except openai.APIStatusError as exc:
                raise StudentError(f"the student answered HTTP {exc.status_code}: {_short(exc)}") from None
            except openai.APIConnectionError as exc:  # includes timeouts
                cause = f" ({exc.__cause__})" if exc.__cause__ else ""
                where = self.client.base_url
                raise StudentError(f"cannot reach the student at {where}: {exc}{cause}") from None
            except json.JSONDecodeError as exc:
                raise StudentError(f"the student's response is not JSON: {exc}") from None
        reply = parse_completion(body)
        reply.elapsed_s = round(time.monotonic() - started, 3)
        return reply


def _short(exc: Exception) -> str:
    return str(exc).replace("\n", " ")[:300]
