"""`--batch`: the batchable calls sent through the providers' batch APIs before the run asks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from replay.options import RunConfig
from replay.select.filters import asked_states

if TYPE_CHECKING:
    from teachers.pool import TeacherPool


async def prefetch_batches(work: Path, config: RunConfig, pool: TeacherPool,
                           console: Console) -> dict[str, Any]:
    """--batch: the batchable calls through the providers' batch APIs, answers into the cache."""
    from dataclasses import asdict

    from teachers.batch import Batcher
    from teachers.batch_store import BatchStore

    store = BatchStore(pool.cache.path)
    try:
        batcher = Batcher(pool, store, poll=config.pool.batch_poll if config.pool else 30.0,
                          note=lambda text: console.print(text))
        return asdict(await batcher.prefetch(asked_states(work)))
    finally:
        store.close()
