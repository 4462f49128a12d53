"""How late the event loop runs: a task that asks to wake every `interval` and notes how late it woke.

A stalled loop leaves answers unread (and unstored) while it is busy, so the run reports its lag
(`report.json` → `extra.loop_lag_ms`) and `bench/loop_lag.py` prints it beside the wall time.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any


class LoopLag:
    """`async with LoopLag() as lag:` ... `lag.summary()` → {"max": ms, "p99": ms, "samples": n}."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.lags: list[float] = []
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.create_task(self._watch())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _watch(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.lags.append(time.perf_counter() - asked - self.interval)

    def summary(self) -> dict[str, Any]:
        """Milliseconds late: the worst wake-up and the 99th percentile.

        >>> lag = LoopLag(); lag.lags = [0.001] * 99 + [0.25]; lag.summary()
        {'max': 250.0, 'p99': 1.0, 'samples': 100}
        """
        ordered = sorted(self.lags) or [0.0]
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99) - 1)] if self.lags else 0.0
        return {"max": round(ordered[-1] * 1000, 1), "p99": round(p99 * 1000, 1), "samples": len(self.lags)}
