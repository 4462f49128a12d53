"""A circuit breaker per teacher: after `threshold` connection errors in a row (no answer in between) the
teacher is stopped for the rest of the run: its calls not yet made fail at once as `unreachable`, and its
retries waiting out a back-off end when it trips, so an endpoint that refuses connections costs seconds,
not every call's full retry schedule (#28)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

UNREACHABLE = "unreachable"


class Unreachable(Exception):
    """Raised instead of an attempt on a stopped teacher; never retried."""


@dataclass
class Breaker:
    """Consecutive connection errors per teacher; `opened` holds the stopped ones and why.

    >>> b = Breaker(2); b.failure("a", "refused"), b.failure("a", "refused"), b.is_open("a")
    (False, True, True)
    """

    threshold: int = 5
    streak: dict[str, int] = field(default_factory=dict)
    opened: dict[str, str] = field(default_factory=dict)
    _events: dict[str, asyncio.Event] = field(default_factory=dict)

    def is_open(self, teacher: str) -> bool:
        return teacher in self.opened

    def success(self, teacher: str) -> None:
        self.streak[teacher] = 0

    def failure(self, teacher: str, reason: str) -> bool:
        """Count one connection error; True when it trips the breaker."""
        self.streak[teacher] = self.streak.get(teacher, 0) + 1
        if self.streak[teacher] >= self.threshold and teacher not in self.opened:
            self.trip(teacher, reason)
            return True
        return False

    def trip(self, teacher: str, reason: str) -> None:
        self.opened[teacher] = reason
        if (event := self._events.get(teacher)) is not None:
            event.set()

    def reason(self, teacher: str) -> str:
        return f"{UNREACHABLE}: {self.opened.get(teacher, '')}".rstrip(": ")

    async def sleep(self, teacher: str, seconds: float) -> None:
        """A back-off that ends early when the teacher is stopped."""
        if self.is_open(teacher):
            return
        event = self._events.get(teacher)
        if event is None or getattr(event, "_replay_loop", None) is not asyncio.get_running_loop():
            event = self._events[teacher] = asyncio.Event()
            event._replay_loop = asyncio.get_running_loop()  # type: ignore[attr-defined]
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except TimeoutError:
            pass
