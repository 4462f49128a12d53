"""Adaptive pacing per teacher: a concurrency window that grows while answers come back clean and halves
on a 429, and token buckets that follow the limits a provider states in its response headers.

Providers say where the limit stands on every answer:
- OpenAI (platform.openai.com/docs/guides/rate-limits): `x-ratelimit-limit-requests|tokens`,
  `x-ratelimit-remaining-requests|tokens`, `x-ratelimit-reset-requests|tokens` (a duration such as
  `1s`, `6m0s`, `12ms`: the time until the limit is back to its initial state), `retry-after` on a 429.
- Anthropic (docs.anthropic.com rate limits): `anthropic-ratelimit-requests|tokens-limit|remaining|reset`
  (reset an RFC 3339 time), `retry-after` on a 429.
Both replenish continuously, so a bucket refills at (limit - remaining) / reset per second (the rate the
provider implies), else limit / 60. A call takes its estimated tokens from the bucket before it is sent
(as OpenAI's cookbook `api_request_parallel_processor` does); each answer's `remaining` corrects the
bucket, net of what was sent after that call. `--per-teacher` stays the ceiling of the window.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_START = 2          # calls in flight before the first answer comes back
_LOW = 0.05         # remaining below this share of the limit: stop growing the window
_MARGIN = 0.98      # of a stated limit used, for the estimate's error


def parse_reset(value: str | None, now: float | None = None) -> float | None:
    """Seconds until a limit resets: an OpenAI duration (`6m0s`, `12ms`, `1.5s`), plain seconds, or an
    RFC 3339 time (Anthropic).

    >>> parse_reset("6m0s"), parse_reset("12ms"), parse_reset("2"), parse_reset("1h2m3.5s"), parse_reset("x")
    (360.0, 0.012, 2.0, 3723.5, None)
    """
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        return sum(float(n) * _UNITS[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


@dataclass(frozen=True)
class Stated:
    """One limit as a response stated it."""

    limit: float
    remaining: float
    reset: float | None


def stated_limits(headers: Mapping[str, str]) -> dict[str, Stated]:
    """{"requests": ..., "tokens": ...} from OpenAI- or Anthropic-style headers (lower-cased keys).

    >>> stated_limits({"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "900",
    ...                "x-ratelimit-reset-tokens": "6s"})
    {'tokens': Stated(limit=1000.0, remaining=900.0, reset=6.0)}
    >>> stated_limits({"anthropic-ratelimit-requests-limit": "50",
    ...                "anthropic-ratelimit-requests-remaining": "49"})
    {'requests': Stated(limit=50.0, remaining=49.0, reset=None)}
    """
    out = {}
    for kind in ("requests", "tokens"):
        for limit, remaining, reset in ((f"x-ratelimit-limit-{kind}", f"x-ratelimit-remaining-{kind}",
                                         f"x-ratelimit-reset-{kind}"),
                                        (f"anthropic-ratelimit-{kind}-limit",
                                         f"anthropic-ratelimit-{kind}-remaining",
                                         f"anthropic-ratelimit-{kind}-reset")):
            try:
                if limit in headers and remaining in headers:
                    out[kind] = Stated(float(headers[limit]), float(headers[remaining]),
                                       parse_reset(headers.get(reset)))
                    break
            except ValueError:
                continue
    return out


@dataclass
class Bucket:
    """A token bucket: `level` of `limit`, refilled at `rate` per second."""

    limit: float
    rate: float
    level: float
    stamp: float

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait(self, amount: float, now: float) -> float:
        """Seconds until `amount` is there (a call larger than the whole bucket waits for a full one).

        >>> Bucket(100, 10, 50, 0.0).wait(70, 0.0), Bucket(100, 10, 50, 0.0).wait(30, 0.0)
        (2.0, 0.0)
        """
        self.refill(now)
        need = min(amount, self.limit)
        return 0.0 if self.level >= need else (need - self.level) / self.rate


@dataclass
class Ticket:
    """One attempt in flight: what it took from the buckets and when."""

    sent: float
    tokens: float
    serial: int


@dataclass
class Limiter:
    """One teacher's pacing. Use from one event loop: `acquire` before each attempt, `release` after."""

    ceiling: int
    clock: Callable[[], float] = time.monotonic
    window: float = float(_START)
    in_flight: int = 0
    growing: bool = True          # slow start (double per window) until the first back-off
    paused_until: float = 0.0
    buckets: dict[str, Bucket] = field(default_factory=dict)
    sent: list[tuple[int, float]] = field(default_factory=list)  # (serial, tokens) of recent attempts
    serial: int = 0
    rate_limited: int = 0         # attempts answered 429
    tokens_done: int = 0          # prompt + completion tokens of the answers
    first: float | None = None
    last: float | None = None
    _changed: asyncio.Condition | None = None
    _loop: Any = None

    def __post_init__(self) -> None:
        self.window = float(min(_START, self.ceiling))

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._changed is None or loop is not self._loop:  # a condition is bound to its loop
            self._changed, self._loop = asyncio.Condition(), loop
            self.in_flight = 0
        return self._changed

    def _wait(self, tokens: float, now: float) -> float:
        if self.in_flight >= max(int(self.window), 1):
            return math.inf
        wait = max(self.paused_until - now, 0.0)
        if "tokens" in self.buckets:
            wait = max(wait, self.buckets["tokens"].wait(tokens, now))
        if "requests" in self.buckets:
            wait = max(wait, self.buckets["requests"].wait(1, now))
        return wait

    async def acquire(self, tokens: float) -> Ticket:
        """Wait for a slot in the window and room in the buckets, then take them."""
        changed = self._condition()
        async with changed:
            while (wait := self._wait(tokens, self.clock())) > 0:
                try:
                    await asyncio.wait_for(changed.wait(), None if math.isinf(wait) else wait)
                except TimeoutError:
                    pass
            now = self.clock()
            for kind, amount in (("tokens", tokens), ("requests", 1.0)):
                if kind in self.buckets:
                    self.buckets[kind].level -= min(amount, self.buckets[kind].limit)
            self.in_flight += 1
            self.serial += 1
            self.sent.append((self.serial, tokens))
            del self.sent[:-4096]
            self.first = now if self.first is None else self.first
            return Ticket(now, tokens, self.serial)

    async def release(self, ticket: Ticket, headers: Mapping[str, str] | None, status: int | None,
                      retry_after: float | None = None, used_tokens: int = 0) -> None:
        """An attempt is over: `status` 429 halves the window and pauses for `retry_after`; a clean answer
        grows it; stated limits reset the buckets."""
        now = self.clock()
        self.in_flight -= 1
        if status == 429:
            self.rate_limited += 1
            self.window = max(1.0, self.window / 2)
            self.growing = False
            if retry_after is not None:
                self.paused_until = max(self.paused_until, now + retry_after)
        elif status is not None and status < 400:
            self.tokens_done += used_tokens
            self.last = now
        low = self._follow(headers or {}, ticket, now)
        if status is not None and status < 400 and not low:
            self.window = min(float(self.ceiling), self.window + (1.0 if self.growing else 1.0 / self.window))
        changed = self._condition()
        async with changed:
            changed.notify_all()

    def _follow(self, headers: Mapping[str, str], ticket: Ticket, now: float) -> bool:
        """Buckets from the stated limits; True when one is nearly spent."""
        low = False
        for kind, stated in stated_limits(headers).items():
            if stated.limit <= 0:
                continue
            limit = stated.limit * _MARGIN
            rate = stated.limit / 60.0
            if stated.reset and stated.limit - stated.remaining >= 1:
                rate = (stated.limit - stated.remaining) / stated.reset
            bucket = self.buckets.get(kind)
            # Sent after this attempt: the provider had not counted those when it answered.
            later = sum(tokens if kind == "tokens" else 1.0 for serial, tokens in self.sent
                        if serial > ticket.serial)
            level = stated.remaining - (stated.limit - limit) + (now - ticket.sent) * rate - later
            if bucket is None:
                self.buckets[kind] = Bucket(limit, rate, min(level, limit), now)
            else:
                bucket.refill(now)
                bucket.limit, bucket.rate = limit, 0.8 * bucket.rate + 0.2 * rate
                bucket.level = min(bucket.level, level)
            low = low or stated.remaining < _LOW * stated.limit
        return low

    def report(self) -> dict[str, Any]:
        """Achieved tokens per minute (answers' usage over the time from first send to last answer),
        429s, and the window and stated limits as they ended.

        >>> Limiter(8).report()["rate_limited"]
        0
        """
        span = (self.last - self.first) if self.first is not None and self.last is not None else 0.0
        return {"tokens_per_minute": round(self.tokens_done / span * 60) if span > 0 else 0,
                "rate_limited": self.rate_limited, "window": round(self.window, 2),
                "stated_limits": {k: round(b.limit / _MARGIN) for k, b in sorted(self.buckets.items())}}


def request_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                   params: Mapping[str, Any]) -> float:
    """What a provider counts a request as against its token limit before answering: the prompt's
    characters / 4 (OpenAI: "estimated based on the character count") plus the output budget asked for.

    >>> request_tokens([{"role": "user", "content": "x" * 400}], [], {"max_tokens": 50}) > 150
    True
    """
    import orjson

    chars = len(orjson.dumps(messages)) + (len(orjson.dumps(tools)) if tools else 0)
    budget = next((params[k] for k in ("max_completion_tokens", "max_tokens")
                   if isinstance(params.get(k), int)), 0)
    return chars / 4 + budget
