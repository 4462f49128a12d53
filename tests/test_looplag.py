"""The loop's own watch: lag measured, and the collector kept from walking long-lived objects."""

from __future__ import annotations

import asyncio
import gc
import weakref

from replay.ask.looplag import LoopLag, QuietGC


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_quiet_gc_defers_cycles_then_catches_up() -> None:
    async def main(quiet: QuietGC) -> tuple[weakref.ref, int]:
        async with LoopLag(interval=0.005) as lag, quiet.freezing():
            # No automatic collection may free the cycle before the freezer's next tick, and no
            # catch-up may run yet: either would free it for reasons the test is not about.
            gc.disable()
            try:
                node = Node()
                ref = weakref.ref(node)
                del node
                frozen = gc.get_freeze_count()
                # Only a freeze adds to the count (an earlier frozen object freed by its refcount
                # lowers it: waiting for any change let the cycle be collected unfrozen, once, in CI).
                while gc.get_freeze_count() <= frozen:  # frozen while still garbage ...
                    await asyncio.sleep(0.01)
                gc.collect()
                assert ref() is not None  # ... no collection may free it now
            finally:
                gc.enable()
            quiet.catch_up = 1_000
            garbage = [Node() for _ in range(5_000)]
            del garbage
            while not quiet.catch_ups:  # past `catch_up` frozen objects: one full collection
                await asyncio.sleep(0.01)
        return ref, lag.summary()["samples"]

    with QuietGC(interval=0.01, catch_up=10**12, check_every=10) as quiet:
        ref, samples = asyncio.run(asyncio.wait_for(main(quiet), 120))
    assert ref() is None and samples > 0
