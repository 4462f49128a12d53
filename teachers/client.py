"""One teacher call through litellm, under exactly one retry policy, and the parse of its answer.

litellm and the OpenAI client under it retry on their own by default (a 429 twice, silently), so both
are switched off (`num_retries=0`, `max_retries=0`) and tenacity alone decides: exponential backoff
with full jitter, `Retry-After` honoured up to a cap, and never a retry of an error that would only
fail again (auth, permission, not found, bad request, context window, exhausted quota).
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import re
import time
from dataclasses import dataclass
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from ingestion.schema import Action, ToolCall
from teachers.breaker import Breaker, Unreachable
from teachers.cost import tokens_of
from teachers.http import MAX_RESPONSE_BYTES, install_sdk_client, is_too_large, sync_handler_client
from teachers.llm import load_litellm
from teachers.ratelimit import Limiter
from teachers.registry import TeacherSpec
from teachers.scrub import install_log_scrubbing, scrub

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S)
_OWN_ARGUMENTS = frozenset({"model", "messages", "tools", "timeout", "num_retries", "max_retries", "stream",
                            "api_base", "api_key", "client"})
# Providers litellm serves with its own HTTP handler, which take one as `client=` (an `HTTPHandler` on
# the pool's sync path): for the OpenAI-format ones, tried against a loopback server (the others fail on
# a handler client); for the rest, typed so in litellm's dispatch (main.py `_dispatch_client_http`).
# Every other provider goes through the OpenAI SDK, which uses `litellm.client_session`. Both are capped
# (teachers.http).
_HANDLER_PROVIDERS = frozenset({"anthropic", "gemini", "vertex_ai", "vertex_ai_beta", "deepseek",
                                "openrouter", "xai", "mistral", "together_ai", "fireworks_ai", "hosted_vllm",
                                "azure_ai", "cometapi", "edenai"})
_CONNECTION = re.compile(r"connection error|connection refused|cannot connect", re.I)
# A 429 that means "out of credit", not "slow down": waiting will not fix it.
_NO_QUOTA = re.compile(r"insufficient_quota|exceeded your current quota|billing", re.I)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: `attempts` in all; waits grow from `base_wait`, never above `max_wait`."""

    attempts: int = 5
    base_wait: float = 1.0
    max_wait: float = 60.0


class MalformedAnswer(Exception):
    """An answer that is no usable action (`reason`): asked again within the retry policy, never cached.
    `entry` is what that attempt cost, so a retried bad answer is still counted as paid for."""

    def __init__(self, reason: str, entry: Any = None) -> None:
        super().__init__(reason)
        self.reason, self.entry = reason, entry


def _headers(error: BaseException) -> dict[str, str]:
    # litellm keeps the provider's response headers on `litellm_response_headers`; its rebuilt
    # `error.response` has them empty for a 429 (measured with the loopback server).
    for source in (getattr(error, "litellm_response_headers", None),
                   getattr(getattr(error, "response", None), "headers", None),
                   getattr(error, "headers", None)):
        if source:
            return {str(k).lower(): str(v) for k, v in dict(source).items()}
    return {}


def retry_after(error: BaseException | None) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, `retry-after` seconds or HTTP date).

    >>> class E(Exception): litellm_response_headers = {"Retry-After": "2"}
    >>> retry_after(E()), retry_after(ValueError())
    (2.0, None)
    """
    if error is None:
        return None
    headers = _headers(error)
    try:
        if "retry-after-ms" in headers:
            return max(float(headers["retry-after-ms"]) / 1000, 0.0)
        if "retry-after" in headers:
            value = headers["retry-after"].strip()
            if re.fullmatch(r"\d+(\.\d+)?", value):
                return float(value)
            when = email.utils.parsedate_to_datetime(value)
            return max(when.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None
    return None


def is_retryable(error: BaseException) -> bool:
    """Rate limits (not exhausted quota), 5xx, timeouts and connection errors; nothing else.

    >>> is_retryable(TimeoutError()), is_retryable(ValueError("bad"))
    (True, False)
    """
    import openai

    if isinstance(error, MalformedAnswer):
        return True
    if is_too_large(error):
        return False  # the same answer again would be as large
    status = getattr(error, "status_code", None)
    if isinstance(error, openai.APIConnectionError | TimeoutError | ConnectionError):
        return True  # litellm's Timeout and APIConnectionError land here
    if status == 429:
        return not _NO_QUOTA.search(str(error))
    return isinstance(status, int) and (status >= 500 or status == 408)


def error_kind(error: BaseException) -> str:
    """A short, stable reason for a failed call, used in `Proposal.error`.

    >>> error_kind(TimeoutError()), error_kind(KeyError("x"))
    ('timeout', 'error')
    """
    if isinstance(error, MalformedAnswer):
        return error.reason
    if isinstance(error, Unreachable):
        return "unreachable"
    litellm = load_litellm()
    if is_too_large(error):
        return "response_too_large"
    status = getattr(error, "status_code", None)
    if isinstance(error, litellm.Timeout | TimeoutError) or status == 408:
        return "timeout"
    if isinstance(error, litellm.ContextWindowExceededError):
        return "context_window"
    if isinstance(error, litellm.APIConnectionError | ConnectionError) or _CONNECTION.search(str(error)):
        return "connection"  # litellm reports a refused connection as a 500 "Connection error."
    kinds = {401: "auth", 403: "permission", 404: "not_found", 400: "bad_request", 422: "bad_request",
             429: "rate_limit"}
    if status in kinds:
        return kinds[status]
    return "server_error" if isinstance(status, int) and status >= 500 else "error"


def describe_error(error: BaseException, spec: TeacherSpec) -> str:
    """`kind: first line of the message`, scrubbed of every key (teachers.scrub), at most 300 characters:
    what `Proposal.error` holds.

    >>> describe_error(TimeoutError("slow"), TeacherSpec(name="a", model="openai/m"))
    'timeout: slow'
    """
    if isinstance(error, Unreachable):
        return str(error)[:300]
    text = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return f"{error_kind(error)}: {scrub(text, spec)[:300]}"


def _wait(policy: RetryPolicy) -> Any:
    backoff = wait_random_exponential(multiplier=policy.base_wait, max=policy.max_wait)

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, MalformedAnswer):
            return 0.0  # a fresh sample, not a server to spare: ask again at once
        hinted = retry_after(error)
        if hinted is not None:
            # Up to 10% on top, so the tasks one 429 stopped together do not all return together.
            return min(hinted * (1 + 0.1 * random.random()), policy.max_wait)
        return backoff(state)

    return wait


def api_key_for(spec: TeacherSpec) -> str | None:
    """The key to send: the spec's own; for a custom endpoint without one, `REPLAY_ENDPOINT_API_KEY` or a
    dummy, never the provider's env key (that would hand OPENAI_API_KEY to whatever host api_base names)."""
    if spec.api_key is not None:
        return spec.api_key.get_secret_value()
    if spec.api_base:
        return os.environ.get("REPLAY_ENDPOINT_API_KEY", "EMPTY")
    return None  # litellm reads the provider's usual environment variable


def missing_keys(spec: TeacherSpec) -> list[str]:
    """Environment variables litellm would need for this teacher and does not find: [] when it is set.

    Only plain `*_API_KEY` providers are judged; cloud providers (bedrock, vertex, azure) can take
    credentials from profiles and roles that litellm's check does not see.

    >>> missing_keys(TeacherSpec(name="local", model="openai/m", api_base="http://127.0.0.1:8000/v1"))
    []
    """
    if spec.api_key is not None or spec.api_base:
        return []
    found = load_litellm().validate_environment(model=spec.model)
    missing = list(found.get("missing_keys") or [])
    if found.get("keys_in_environment") or not all(k.endswith("_API_KEY") for k in missing):
        return []
    return missing


def call_kwargs(spec: TeacherSpec, tools: list[dict[str, Any]],
                options: dict[str, Any] | None = None) -> dict[str, Any]:
    """litellm arguments of a teacher's call besides model, messages, timeout, retries and client.

    >>> sorted(call_kwargs(TeacherSpec(name="a", model="openai/m", api_base="http://h/v1",
    ...                                params={"temperature": 0, "timeout": 5}), []))
    ['api_base', 'api_key', 'temperature']
    """
    # The call's own arguments win: a `timeout` or `num_retries` in params would be a TypeError.
    kwargs: dict[str, Any] = {k: v for k, v in spec.params.items() if k not in _OWN_ARGUMENTS}
    if tools:
        kwargs["tools"] = tools
    if spec.api_base:
        kwargs["api_base"] = spec.api_base
    kwargs.update({k: v for k, v in (options or {}).items() if k not in _OWN_ARGUMENTS})
    key = api_key_for(spec)
    if key is not None:
        kwargs["api_key"] = key
    return kwargs


def retrying(policy: RetryPolicy, on_retry: Any = None, sleep: Any = None) -> AsyncRetrying:
    """The one retry policy, for any call to a provider (completions, batch files and batches);
    `on_retry(error)` before each wait; `sleep(seconds)` waits (default asyncio.sleep)."""
    extra = {"sleep": sleep} if sleep is not None else {}
    return AsyncRetrying(stop=stop_after_attempt(max(policy.attempts, 1)), wait=_wait(policy),
                         retry=retry_if_exception(is_retryable), reraise=True,
                         before_sleep=(lambda state: on_retry(state.outcome.exception()))
                         if on_retry else None, **extra)


def _http_client(litellm: Any, spec: TeacherSpec) -> Any:
    """The capped client for this teacher's provider (teachers.http), passed the way litellm takes it."""
    install_sdk_client(litellm)  # providers served through the OpenAI SDK
    try:
        provider = litellm.get_llm_provider(spec.model, api_base=spec.api_base)[1]
    except Exception:  # litellm raises its BadRequestError for an unknown provider
        return None
    return sync_handler_client() if provider in _HANDLER_PROVIDERS else None


async def complete(spec: TeacherSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                   timeout: float, policy: RetryPolicy, on_retry: Any = None, accept: Any = None,
                   max_response_bytes: int = 10_000_000, options: dict[str, Any] | None = None,
                   limiter: Limiter | None = None, weight: float = 0.0,
                   breaker: Breaker | None = None) -> Any:
    """The chat.completion body (a plain dict) for one call, or what `accept(body)` returns; raises the
    last error when all attempts fail. `accept` may raise `MalformedAnswer` to have the call asked again.
    An answer over `max_response_bytes` raises (teachers.http.ResponseTooLarge, wrapped) unread.
    `options`: per-call litellm options that do not change the answer (prompt-cache hints).
    `limiter` paces every attempt (`teachers.ratelimit`, `weight` its estimated tokens) and learns from
    its status and headers; `breaker` counts connection errors and stops a teacher it trips
    (`teachers.breaker`: then `Unreachable`, never retried; back-offs end early).

    Each attempt runs whole on a worker thread (`teachers.workers`), through litellm's sync
    `completion`: request building (the OpenAI SDK walks every message of a large prompt), the HTTP
    call, the parse, then `accept`. So the run's event loop never stalls on a large prompt, and an
    answer is handled (stored) the moment it arrives, whatever that loop is doing. Waits between
    attempts are async. (Not `acompletion` on per-thread loops: litellm's logging worker is bound to one
    event loop and would be rebound, its tasks dropped, at every call.)
    """
    from teachers.workers import blocking

    litellm = load_litellm()
    # litellm logs failed calls with the provider's message, which may echo the key sent.
    install_log_scrubbing("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
    client = _http_client(litellm, spec)
    kwargs = call_kwargs(spec, tools, options)
    if client is not None:
        kwargs["client"] = client

    def attempt() -> tuple[Any, dict[str, str], int]:
        MAX_RESPONSE_BYTES.set(max_response_bytes)  # this worker thread's calls
        response = litellm.completion(model=spec.model, messages=messages, timeout=timeout,
                                      num_retries=0, max_retries=0, **kwargs)
        raw = getattr(response, "_response_headers", None) or {}
        headers = {str(k).lower(): str(v) for k, v in raw.items()}
        body = response.model_dump(mode="json", exclude_none=True)
        usage = tokens_of(body)
        used = usage.prompt + usage.completion
        try:
            return (accept(body) if accept is not None else body), headers, used
        except MalformedAnswer as bad:
            bad.headers, bad.used = headers, used
            raise

    async def paced() -> Any:
        if breaker is not None and breaker.is_open(spec.name):
            raise Unreachable(breaker.reason(spec.name))
        ticket = await limiter.acquire(weight) if limiter is not None else None
        try:
            result, headers, used = await blocking(attempt)
        except MalformedAnswer as bad:  # an answer all the same: the endpoint is fine
            if ticket is not None:
                await limiter.release(ticket, getattr(bad, "headers", None), 200,
                                      used_tokens=getattr(bad, "used", 0))
            if breaker is not None:
                breaker.success(spec.name)
            raise
        except Exception as error:
            if ticket is not None:
                await limiter.release(ticket, _headers(error), getattr(error, "status_code", None),
                                      retry_after(error))
            if breaker is not None:
                if error_kind(error) == "connection":
                    breaker.failure(spec.name, describe_error(error, spec).split(": ", 1)[-1])
                else:
                    breaker.success(spec.name)
            raise
        if ticket is not None:
            await limiter.release(ticket, headers, 200, used_tokens=used)
        if breaker is not None:
            breaker.success(spec.name)
        return result

    sleep = (lambda seconds: breaker.sleep(spec.name, seconds)) if breaker is not None else None
    return await retrying(policy, on_retry, sleep)(paced)


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content or ""


def parse_action(message: dict[str, Any]) -> tuple[Action | None, str | None]:
    """(action, None) from an assistant message, or (None, reason) when it is not a usable answer.

    Reasoning goes to `thinking`, never `content` (`reasoning_content`, or `<think>` inline as some
    OpenAI-compatible servers send it). Tool arguments must decode to a JSON object.

    >>> call = {"id": "c", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}
    >>> parse_action({"content": "<think>hmm</think>ok", "tool_calls": [call]})[0].model_dump()
    {'content': 'ok', 'tool_calls': [{'id': 'c', 'name': 'Bash', 'arguments': {'command': 'ls'}}], \
'thinking': 'hmm'}
    >>> parse_action({"tool_calls": [{"id": "c", "function": {"name": "Bash", "arguments": "{oops"}}]})
    (None, 'invalid_tool_arguments')
    """
    content = _text(message.get("content"))
    thoughts = [message["reasoning_content"]] if message.get("reasoning_content") else []
    if "</think>" in content and "<think>" not in content:  # the template opened it in the prompt
        content = "<think>" + content
    thoughts += [t.strip() for t in _THINK.findall(content)]
    content = _THINK.sub("", content).strip()
    calls = []
    for i, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        raw = function.get("arguments")
        try:
            arguments = raw if isinstance(raw, dict) else json.loads(raw) if (raw or "").strip() else {}
        except (TypeError, ValueError):
            return None, "invalid_tool_arguments"
        if not isinstance(arguments, dict) or not function.get("name"):
            return None, "invalid_tool_arguments"
        calls.append(ToolCall(id=call.get("id") or f"call_{i}", name=function["name"], arguments=arguments))
    if not content and not calls:
        return None, "empty_response"
    return Action(content=content, tool_calls=calls, thinking="\n\n".join(thoughts) or None), None
