"""A loopback provider that enforces requests- and tokens-per-minute limits the way OpenAI documents them
(platform.openai.com/docs/guides/rate-limits; the cookbook's api_request_parallel_processor.py):

- every answer carries `x-ratelimit-limit-requests|tokens`, `x-ratelimit-remaining-requests|tokens` and
  `x-ratelimit-reset-requests|tokens` (the time until that limit is back to its initial state, written
  as OpenAI writes it: `1s`, `6m0s`, `20ms`);
- a request counts against the token limit as it arrives, estimated from its characters (4 per token)
  plus the `max_tokens` / `max_completion_tokens` it asks for;
- limits replenish continuously (a bucket refilled at limit / window per second);
- past either limit the answer is 429 `rate_limit_exceeded` with `retry-after` (whole seconds) and the
  same headers; an unsuccessful request still counts against the requests limit (the cookbook: "failed
  requests contribute to your per-minute limit").

`window` is the period the limits are per: 60 s at OpenAI, shorter in tests so that they run in seconds.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.llm_server import LLMServer, Reply, error_body


def duration(seconds: float) -> str:
    """OpenAI's reset format.

    >>> duration(360), duration(0.02), duration(1.5), duration(3723.5)
    ('6m0s', '20ms', '1.5s', '1h2m3.5s')
    """
    if seconds < 1:
        return f"{max(round(seconds * 1000), 0)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if minutes or hours:
        text = f"{int(minutes)}m{text}"
    return f"{int(hours)}h{text}" if hours else text


def counted_tokens(body: dict[str, Any]) -> int:
    """What a request counts against the token limit when it arrives."""
    chars = len(json.dumps(body.get("messages") or [])) + len(json.dumps(body.get("tools") or []))
    budget = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return math.ceil(chars / 4) + int(budget)


@dataclass
class Limits:
    """Both buckets, thread-safe; `log` holds (time, tokens counted, status) per request."""

    rpm: int
    tpm: int
    window: float = 60.0
    clock: Callable[[], float] = time.monotonic
    log: list[tuple[float, int, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _level: dict[str, float] = field(default_factory=dict)
    _stamp: float | None = None

    def _refill(self, now: float) -> None:
        if self._stamp is None:
            self._level = {"requests": float(self.rpm), "tokens": float(self.tpm)}
        else:
            for kind, limit in (("requests", self.rpm), ("tokens", self.tpm)):
                self._level[kind] = min(limit, self._level[kind] + (now - self._stamp) * limit / self.window)
        self._stamp = now

    def admit(self, body: dict[str, Any]) -> tuple[bool, dict[str, str]]:
        """(admitted, headers) for a request arriving now."""
        tokens = counted_tokens(body)
        with self._lock:
            now = self.clock()
            self._refill(now)
            ok = self._level["requests"] >= 1 and self._level["tokens"] >= min(tokens, self.tpm)
            self._level["requests"] -= 1
            if ok:
                self._level["tokens"] -= min(tokens, self.tpm)
            self.log.append((now, tokens, 200 if ok else 429))
            headers = {}
            for kind, limit in (("requests", self.rpm), ("tokens", self.tpm)):
                left = max(self._level[kind], 0.0)
                headers[f"x-ratelimit-limit-{kind}"] = str(limit)
                headers[f"x-ratelimit-remaining-{kind}"] = str(int(left))
                headers[f"x-ratelimit-reset-{kind}"] = duration((limit - left) * self.window / limit)
            if not ok:
                short_requests = max(1 - self._level["requests"], 0.0) * self.window / self.rpm
                deficit = max(min(tokens, self.tpm) - self._level["tokens"], 0.0)
                short_tokens = deficit * self.window / self.tpm
                headers["retry-after"] = str(max(math.ceil(max(short_requests, short_tokens)), 1))
        return ok, headers

    @property
    def rejected(self) -> int:
        return sum(1 for _, _, status in self.log if status == 429)

    @property
    def admitted(self) -> int:
        return sum(1 for _, _, status in self.log if status == 200)


def rate_limited(limits: Limits,
                 answer: Callable[[dict[str, Any]], Reply]) -> Callable[[dict[str, Any]], Reply]:
    """A responder for `LLMServer`: `answer` scripts the reply of an admitted request."""

    def respond(body: dict[str, Any]) -> Reply:
        ok, headers = limits.admit(body)
        if not ok:
            message = (f"Rate limit reached for {body.get('model')} on tokens per min (TPM): Limit "
                       f"{limits.tpm}. Please try again in {headers['retry-after']}s.")
            return Reply(error_body(message, "tokens", "rate_limit_exceeded"), 429, headers)
        reply = answer(body)
        return Reply(reply.body, reply.status, {**reply.headers, **headers}, reply.delay)

    return respond


def rate_limited_server(limits: Limits, answer: Callable[[dict[str, Any]], Reply]) -> LLMServer:
    """`with rate_limited_server(Limits(rpm=..., tpm=...), answer) as server: ...`"""
    return LLMServer(rate_limited(limits, answer))
