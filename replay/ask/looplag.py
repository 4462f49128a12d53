"""How late the event loop runs, and what keeps it on time.

`LoopLag`: a task that asks to wake every `interval` and notes how late it woke. A stalled loop
leaves answers unread while it is busy, so the run reports its lag (`report.json` →
`extra.loop_lag_ms`) and `bench/loop_lag.py` prints it beside the wall time.

`QuietGC`: CPython's full (generation 2) collection walks every tracked object while holding the
GIL; with litellm imported (380k objects) and the settled states' messages kept for the export, each
took 0.5-1.8 s and was the run's worst stall (measured on the fixtures: 12 full collections, 11 s
in all). Objects that live until the end of the run are moved out of the collector's sight
(`gc.freeze`: a list splice, O(1)); refcounting still frees them, and they are handed back at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import time
from collections.abc import AsyncIterator
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


class QuietGC:
    """`with QuietGC() as quiet: asyncio.run(main())`, and `async with quiet.freezing():` in the loop:
    what is tracked is frozen every `interval` seconds, so a full collection only ever walks what the
    last `interval` allocated. Enter and leave it outside the loop (entering collects once).

    The price: garbage cycles among frozen objects wait (about 60 objects, 5 kB, per call: tenacity's
    and httpx's own cycles, measured). Once `catch_up` more objects are frozen, one full collection
    reclaims them: a pause of the order of a second, every ~15,000 calls; none on the fixtures."""

    def __init__(self, interval: float = 0.1, catch_up: int = 1_000_000, check_every: int = 600) -> None:
        self.interval, self.catch_up = interval, catch_up
        self.check_every = check_every  # ticks between counts of the frozen objects (O(n): once a minute)
        self.catch_ups = 0
        self._frozen = 0

    def __enter__(self) -> QuietGC:
        gc.collect()
        gc.freeze()  # the imports: litellm, datasets, openai types
        self._frozen = gc.get_freeze_count()
        return self

    @contextlib.asynccontextmanager
    async def freezing(self) -> AsyncIterator[None]:
        async def freeze() -> None:
            for tick in itertools.count(1):
                await asyncio.sleep(self.interval)
                gc.freeze()  # a list splice: O(1)
                if tick % self.check_every == 0 and gc.get_freeze_count() > self._frozen + self.catch_up:
                    gc.unfreeze()
                    gc.collect()
                    gc.freeze()
                    self._frozen, self.catch_ups = gc.get_freeze_count(), self.catch_ups + 1

        task = asyncio.create_task(freeze())
        try:
            yield
        finally:
            task.cancel()

    def __exit__(self, *exc: object) -> None:
        gc.unfreeze()  # the garbage cycles among them are collected later, as usual
