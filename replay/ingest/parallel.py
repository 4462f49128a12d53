"""Ingestion and redaction on every core: files read, redacted and serialised apart in worker
processes, merged in file order into exactly the bytes one process reading them one after another
writes (issue #29).

Reading a file depends on the files before it only through `Seen` (message ids a resumed session copies,
state ids already taken) and through the trace the previous file ended on (a failed last state names
its recovery in the next file; the redactor counts a secret once per trace). So a worker reads its file
against an empty, tracking Seen and redacts it with a fresh redactor; the main process takes the
result when no id the worker asked about was given by an earlier file, and otherwise reads the file
again itself against the real Seen (a resumed session: a small share of files). A file whose first
trace is the one the previous file ended on, which no worker can see, sends the whole ingestion back
to one process (`Sequential`), so no case is ever merged differently.

A worker sends back its file's rows already serialised (`ingestion.store.Shard`): the main process
only renumbers segments and appends, so it never becomes the bottleneck. Workers pay off on large
sources only (`auto_workers`).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ingestion.ids import Seen
from ingestion.options import IngestOptions
from ingestion.outcome import link_recoveries
from ingestion.schema import ReplayError, TraceState
from ingestion.sources import read_file
from ingestion.stats import IngestStats
from ingestion.store import Shard, ShardWriter

if TYPE_CHECKING:
    from teachers.redact_state import StateRedactor

# Below this many bytes of input, starting workers costs more than it saves (~0.3 s each).
MIN_PARALLEL_BYTES = 64 << 20
MAX_AUTO_WORKERS = 8
INPUT_AHEAD = 32 << 20   # bytes of input queued ahead per worker


class Sequential(ReplayError):
    """A file continues the trace the previous file ended on: read the source in one process."""


@dataclass
class Redaction:
    """What a redactor counted over one file (added to the main process's redactor)."""

    counts: Counter[str] = field(default_factory=Counter)
    states_token_ids_dropped: int = 0


@dataclass
class FileResult:
    shard: Shard
    first_trace: str | None
    last_trace: str | None
    stats: IngestStats
    seen: Seen
    redaction: Redaction | None


def _shard(states: list[TraceState]) -> tuple[Shard, str | None, str | None]:
    writer = ShardWriter()
    for state in states:
        writer.write(state)
    return writer.shard(), states[0].trace_id if states else None, states[-1].trace_id if states else None


def auto_workers(files: list[Path], requested: int | None = None) -> int:
    """How many worker processes: `requested` (from --ingest-workers; 1 reads in this process), else
    one per core (at most 8) when the files hold at least 64 MB, else 1.

    >>> auto_workers([], 3), auto_workers([])
    (3, 1)
    """
    if requested is not None:
        return max(1, requested)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores < 2:
        return 1
    size = 0
    for path in files:
        size += _size(path)
        if size >= MIN_PARALLEL_BYTES:
            return min(cores, MAX_AUTO_WORKERS)
    return 1


def read_apart(path: Path, options: IngestOptions, key: bytes | None, redact: bool) -> FileResult:
    """One file read as if it were the first of the run (a worker's job)."""
    from teachers.redact_state import StateRedactor

    stats = IngestStats()
    seen = Seen.tracking()
    redactor = StateRedactor(key) if redact else None
    # The cyclic GC walks every live object of the file again and again while they pile up, and finds
    # no garbage (messages, states and their copies hold no cycles): off for the file, 5% of a worker.
    gc.disable()
    try:
        states = [redactor(s) if redactor is not None else s
                  for s in link_recoveries(read_file(path, options, stats, seen))]
        shard = _shard(states)
    finally:
        gc.enable()
    redaction = None if redactor is None else Redaction(redactor.counts, redactor.states_token_ids_dropped)
    return FileResult(*shard, stats, seen, redaction)


def _warm() -> None:
    from teachers.secret_rules import rule_set

    rule_set()  # compiled (and the prefilter loaded) once per worker, before its first file


@contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """`workers` processes, started now: enter it before any thread of ours (the progress bar) runs.

    Forked on Linux when this process runs no other thread: a fork starts at once, with everything
    imported, and never imports the caller's main module again (spawn and forkserver do, which breaks a
    script without an `if __name__ == "__main__"` guard). With other threads alive (a library caller's),
    forking could copy a held lock: a fork server then starts clean processes instead (macOS too)."""
    methods = multiprocessing.get_all_start_methods()
    if sys.platform == "linux" and threading.active_count() == 1:
        context = multiprocessing.get_context("fork")
    elif "forkserver" in methods:   # macOS forks badly (its system libraries), Linux with threads
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
    else:   # Windows
        context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        # The first submit starts every process (forked ones at once, in submit); the rules are
        # compiled in each while this process lists and queues the files.
        for _ in range(workers):
            pool.submit(_warm)
        yield pool


def parallel_shards(pool: ProcessPoolExecutor, workers: int, files: list[Path], options: IngestOptions,
                    stats: IngestStats, redactor: StateRedactor | None,
                    on_file: Callable[[Path], None] | None = None) -> Iterator[Shard]:
    """Every state of `files`, redacted by (or as by) `redactor`, as one shard per file in file order
    (`StateWriter.write_shard`); `stats` and the redactor's counts as reading them in one process
    gives. Raises `Sequential` (nothing merged wrong) when a file continues the previous file's last
    trace. Not for --max-states (it stops mid-file)."""
    if options.max_states is not None:
        raise ValueError("parallel_shards reads whole files: use ingestion.sources.iter_states")
    key = redactor.key if redactor is not None else None
    seen = Seen()
    last_trace: str | None = None
    pending: list[tuple[Path, int, Future[FileResult]]] = []
    in_flight = 0   # input bytes of the pending files
    queue = iter(files)
    try:
        while True:
            # Files queued ahead keep the workers busy while this process waits on one file or reads
            # one again itself (4% of the run on real sessions), up to INPUT_AHEAD bytes per worker:
            # their results wait here, about a quarter of their size.
            while len(pending) < 2 * workers + 2 or (in_flight < INPUT_AHEAD * workers
                                                      and len(pending) < 16 * workers):
                path = next(queue, None)
                if path is None:
                    break
                size = _size(path)
                job = pool.submit(read_apart, path, options, key, redactor is not None)
                pending.append((path, size, job))
                in_flight += size
            if not pending:
                return
            path, size, future = pending.pop(0)
            in_flight -= size
            result = future.result()
            if seen.disjoint(result.seen):
                _continues(result.first_trace, last_trace)
                stats.add(result.stats)
                seen.update(result.seen)
                if redactor is not None and result.redaction is not None:
                    redactor.counts.update(result.redaction.counts)
                    redactor.states_token_ids_dropped += result.redaction.states_token_ids_dropped
                shard, last = result.shard, result.last_trace
            else:   # an earlier file gave some of its ids: read it here, against what they gave
                states = list(link_recoveries(read_file(path, options, stats, seen)))
                _continues(states[0].trace_id if states else None, last_trace)
                if redactor is not None:
                    states = [redactor(s) for s in states]
                shard, _first, last = _shard(states)
            last_trace = last or last_trace
            yield shard
            if on_file is not None:
                on_file(path)
    finally:
        for _path, _bytes, future in pending:
            future.cancel()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0   # the worker says why (a counted skip)


def _continues(first_trace: str | None, last_trace: str | None) -> None:
    if first_trace is not None and first_trace == last_trace:
        raise Sequential(f"trace {last_trace} goes on from one file into the next")
