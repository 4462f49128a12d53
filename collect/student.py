"""The student's servers: one chat completion per request, under one retry policy.

A `Backend` is one server. A vLLM server (no `--student-provider`) is asked through the openai client's
raw response: the record must be the exact wire request (litellm rewrites messages on the way, e.g.
drops `content: null`, and the next prompt must extend the last one token for token), and vLLM's extra
fields (`prompt_token_ids`, `choices[].token_ids`) are read as sent. An official API
(`--student-provider openai|anthropic|...`) is asked through litellm, without the token extension:
same agents, same harness, no token ids.

A vLLM reply with token ids is also read back as text (`POST /detokenize`, at the server's root): the
next request sends it back as generated (collect/reply.py `raw_history_message`), so that every prompt
extends the previous prompt + completion; a break left anyway is explained per turn (`explain_break`).

The token extension (`logprobs: true`, `return_token_ids: true`) is dropped for one server only, and
only when that server refuses one of its fields by name (collect/server_errors.py); why is kept in
`dropped` for the run's report. Neither client retries on its own (`max_retries=0`, `num_retries=0`):
one tenacity policy retries a connection that failed or a 429 / 5xx twice, honouring Retry-After, and
never a timeout, so a hung server costs one `--request-timeout`, not three.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from typing import Any

from collect.config import CollectConfig
from collect.reply import (
    BadReply,
    EchoStyle,
    StudentReply,
    break_at,
    generated_ids,
    parse_completion,
    raw_history_message,
    resolve_echo,
    with_reasoning,
)
from collect.server_errors import (
    error_fields,
    is_context_overflow,
    needs_auto_tool_choice,
    unsupported_extension,
)
from ingestion.rollout_format import PrefixBreak

log = logging.getLogger("collect")
RETRIES = 2
MAX_WAIT_S = 30.0


class StudentError(Exception):
    """The student could not answer (unreachable, HTTP error, malformed response).

    `status`: what a client of ours (the recording proxy's CLI) is told: 400 for a refused request, 502
    for a server that failed or could not be reached."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


class ContextOverflow(StudentError):
    """The conversation no longer fits the model's context: the student's failure, graded as it stands."""


class ToolParsingOff(StudentError):
    """A vLLM started without --enable-auto-tool-choice: no rollout can work."""


class _Retry(Exception):
    """A failure worth another attempt (after `wait` s, the server's Retry-After, or a backoff)."""

    def __init__(self, failure: StudentError, wait: float | None = None) -> None:
        super().__init__(str(failure))
        self.failure, self.wait = failure, wait


class _Refused(Exception):
    """A 4xx: the request itself was refused (never retried as is)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status, self.body = status, body


def _retry_after(exc: Any) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        return float(headers["retry-after"]) if "retry-after" in headers else None
    except ValueError:
        return None


def _wait(state: Any) -> float:
    """The server's Retry-After when it sent one, else full-jitter exponential backoff; capped."""
    failure = state.outcome.exception() if state.outcome else None
    hinted = failure.wait if isinstance(failure, _Retry) else None
    wait = hinted if hinted is not None else random.uniform(0, 2 ** (state.attempt_number - 1))
    return min(max(wait, 0.0), MAX_WAIT_S)


def _short(text: str) -> str:
    return text.replace("\n", " ")[:300]


class Backend:
    """One student server, shared by every worker (both clients are thread-safe)."""

    def __init__(self, url: str | None, api_key: str, provider: str | None = None, timeout: float = 600.0,
                 retries: int = RETRIES) -> None:
        self.url = url
        self.provider = provider
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.extension = provider is None      # vLLM's token extension; official APIs have none
        self.dropped: str | None = None        # why the extension was dropped for this server
        self.reasoning_field: str | None = None
        self.detokenizes = provider is None    # POST /detokenize served (vLLM); off after a 404
        self._lock = threading.Lock()
        self._client: Any = None

    @property
    def name(self) -> str:
        return self.url or f"{self.provider} API"

    def send(self, request: dict[str, Any]) -> StudentReply:
        """One completion of `request` (model, messages, tools, sampling); StudentError if there is none."""
        try:
            return self._send(request)
        except StudentError as exc:     # errors end up in rollouts and reports: never with the key in them
            if self.api_key in ("", "EMPTY") or self.api_key not in str(exc):
                raise
            raise type(exc)(str(exc).replace(self.api_key, "***"), exc.status) from None

    def _send(self, request: dict[str, Any]) -> StudentReply:
        started = time.monotonic()
        while True:
            extension = self.extension
            try:
                body = self._attempts(request, extension)
                break
            except _Refused as refused:
                message, param = error_fields(refused.body)
                key = unsupported_extension(message, param) if extension else None
                if key is None:
                    raise self._error(refused.status, message) from None
                with self._lock:
                    if self.extension:
                        self.extension = False
                        self.dropped = f"HTTP {refused.status}: {_short(message)}"
                        log.warning("%s refuses %s: token ids are off for this server", self.name, key)
        try:
            reply = parse_completion(body)
        except BadReply as exc:
            raise StudentError(f"the student's response cannot be used: {exc}") from None
        self.reasoning_field = reply.reasoning_field or self.reasoning_field
        reply.elapsed_s = round(time.monotonic() - started, 3)
        return reply

    def served_models(self) -> list[dict[str, Any]] | None:
        """GET /models of a vLLM server (its cards carry max_model_len); None where there is no such list."""
        import openai

        try:
            raw = self._openai().models.with_raw_response.list()
        except openai.APIConnectionError as exc:     # a timeout included: the server is not answering
            raise StudentError(f"cannot reach the student at {self.name}: {exc}") from None
        except openai.APIStatusError:
            return None
        try:
            data = json.loads(raw.text).get("data")
        except (json.JSONDecodeError, AttributeError):
            return None
        return [card for card in data if isinstance(card, dict)] if isinstance(data, list) else None

    def detokenize(self, ids: list[int]) -> str | None:
        """The text of `ids` as the server's tokenizer decodes them (special tokens kept); None where the
        server does not serve /detokenize or did not answer (the caller falls back to the parsed reply)."""
        import httpx

        if not self.detokenizes or not self.url:
            return None
        root = self.url.rstrip("/").removesuffix("/v1")       # vLLM serves it beside /v1, not under it
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key not in ("", "EMPTY") else {}
        try:
            answer = httpx.post(f"{root}/detokenize", json={"tokens": ids}, headers=headers,
                                timeout=self.timeout)
            text = answer.json().get("prompt") if answer.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            log.warning("%s: /detokenize failed (%s)", self.name, type(exc).__name__)
            return None
        if answer.status_code in (404, 405):
            with self._lock:
                if self.detokenizes:
                    self.detokenizes = False
                    log.warning("%s serves no /detokenize: replies go back parsed (the prefix may break)",
                                self.name)
        return text if isinstance(text, str) else None

    def _error(self, status: int, message: str) -> StudentError:
        if is_context_overflow(message):
            return ContextOverflow(f"the conversation exceeds the student's context: {_short(message)}", 400)
        if needs_auto_tool_choice(message):
            return ToolParsingOff(_short(message), 400)
        if 400 <= status < 500 and status != 429:
            return StudentError(f"the student rejected the request: HTTP {status}: {_short(message)}", 400)
        return StudentError(f"the student answered HTTP {status}: {_short(message)}")

    def _attempts(self, request: dict[str, Any], extension: bool) -> dict[str, Any]:
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

        retrying = Retrying(stop=stop_after_attempt(self.retries + 1), wait=_wait, reraise=True,
                            retry=retry_if_exception_type(_Retry))
        try:
            return retrying(self._once, request, extension)
        except _Retry as retry:
            raise retry.failure from None

    def _once(self, request: dict[str, Any], extension: bool) -> dict[str, Any]:
        import openai

        try:
            if self.provider is None:
                extra = {"logprobs": True, "extra_body": {"return_token_ids": True}} if extension else {}
                raw = self._openai().chat.completions.with_raw_response.create(**request, **extra)
                return self._json(raw.text)
            return self._litellm(request)
        except openai.APITimeoutError:
            raise StudentError(f"the student at {self.name} did not answer within {self.timeout:g} s "
                               "(--request-timeout)") from None
        except openai.APIConnectionError as exc:
            cause = f" ({exc.__cause__})" if exc.__cause__ else ""
            raise _Retry(StudentError(f"cannot reach the student at {self.name}: {exc}{cause}")) from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            body = exc.response.text if self.provider is None else getattr(exc, "message", str(exc))
            if type(exc).__name__ == "ContextWindowExceededError":     # litellm knows each provider's text
                raise ContextOverflow(f"the conversation exceeds the student's context: {_short(body)}",
                                      400) from None
            if status == 429 or status >= 500:
                raise _Retry(self._error(status, error_fields(body)[0]), _retry_after(exc)) from None
            raise _Refused(status, body) from None

    def _json(self, text: str) -> dict[str, Any]:
        try:
            body = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StudentError(f"the student's response is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise StudentError("the student's response is not a JSON object")
        return body

    def _openai(self) -> Any:
        with self._lock:
            if self._client is None:
                from openai import OpenAI

                self._client = OpenAI(base_url=self.url, api_key=self.api_key, timeout=self.timeout,
                                      max_retries=0)
            return self._client

    def _litellm(self, request: dict[str, Any]) -> dict[str, Any]:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")   # no cost-map fetch on import
        import litellm

        model = request["model"]
        if not model.startswith(f"{self.provider}/"):
            model = f"{self.provider}/{model}"
        key = self.api_key if self.api_key not in ("", "EMPTY") else None     # None: the provider's env var
        response = litellm.completion(**{**request, "model": model}, api_base=self.url, api_key=key,
                                      timeout=self.timeout, num_retries=0, max_retries=0)
        return response.model_dump()


def sampling_of(config: CollectConfig) -> dict[str, Any]:
    """The sampling parameters a run sends (only those given: the others are the server's defaults).

    >>> sampling_of(CollectConfig(instances="i", student_url="u", student_model="m", out="o", top_p=0.9))
    {'top_p': 0.9}
    """
    return {key: value for key, value in (("temperature", config.temperature), ("top_p", config.top_p),
                                          ("max_tokens", config.max_tokens)) if value is not None}


class Student:
    """The mini agent's student: one backend, the run's model and sampling, the reasoning echo."""

    def __init__(self, config: CollectConfig, backend: Backend | None = None,
                 think_tags: tuple[str, str] = ("<think>", "</think>")) -> None:
        self.backend = backend or Backend(config.student_url, config.api_key, config.student_provider,
                                          config.request_timeout)
        self.model = config.student_model
        self.sampling = sampling_of(config)
        self.echo: EchoStyle = config.reasoning_echo
        self.think_tags = think_tags

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> StudentReply:
        reply = self.backend.send({"model": self.model, "messages": messages, "tools": tools,
                                   "tool_choice": "auto", **self.sampling})
        if (ids := generated_ids(reply, self.sampling.get("max_tokens"))) is not None:
            reply.text = self.backend.detokenize(ids)
        return reply

    def history_message(self, reply: StudentReply) -> dict[str, Any]:
        """The reply as the next request shows it to the student: as generated where its text is known
        (`--reasoning-echo auto`), else parsed, its reasoning where the template reads it."""
        style = resolve_echo(self.echo, reply.reasoning_field or self.backend.reasoning_field)
        if self.echo == "auto" and (raw := raw_history_message(reply, style, self.think_tags)) is not None:
            return raw
        return with_reasoning(reply.message, reply.reasoning, style, self.think_tags)

    def explain_break(self, previous: StudentReply, reply: StudentReply) -> PrefixBreak:
        """Why `reply`'s prompt does not extend the previous prompt + completion: the earlier history
        rendered otherwise, the previous reply rendered otherwise, or the same text as other tokens."""
        token, offset = break_at(previous, reply)
        written = (previous.prompt_token_ids or []) + (generated_ids(previous, self.sampling.get(
            "max_tokens")) or [])
        before = self.backend.detokenize(written[token:])
        shown = self.backend.detokenize((reply.prompt_token_ids or [])[token:])
        if before is None or shown is None:
            reason = "unknown"
        elif shown.startswith(before):       # the same text from there on, cut into other tokens
            reason = "retokenized"
        else:
            reason = "history_rewritten" if offset is None else "rerendered"
        return PrefixBreak(reason=reason, token=token, completion_offset=offset)
