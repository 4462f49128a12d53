"""Ingestion and redaction on every core: files read, redacted and serialised at once in worker
processes, merged in file order into exactly the bytes one process reading them one after another
writes (issues #29, #39), whatever the files' cross-references.

Reading a file depends on the files before it in three ways, each settled without reading anything
twice or in one process:

- **Ids** (a resumed or copied session repeats message ids: those turns give no state; two files of one
  session give a trace a distinct id when its state ids are taken). A reader asks for every id of a
  file at once, after parsing it and before building any state (`ingestion.ids.Seen.claim`); in a
  worker the claim goes to this process, whose `Resolver` thread answers the claims of file N once
  files 0..N-1 have made theirs, from the one `Seen` of the run. So a worker builds only the states one
  process would, numbered and named as it would.
- **Segments** (a file whose first trace is the one the previous file ended on): the writer goes on in
  its segment (`MergingWriter.write_shard`, ingestion/shards.py).
- **The last state of the previous file's trace**: a failed one names its recovery in the next file
  (`Shard.with_recovery`), and the redactor counts a secret once per trace: what the two files' parts
  of one trace both found is counted once (`_Counting`).

A worker sends back its file's rows already serialised (`ingestion.shards.Shard`): this process only
settles ids, renumbers segments and appends, so it never becomes the bottleneck. Workers pay off on
large sources only (`auto_workers`).
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
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestion.ids import Claim, Grant, Seen
from ingestion.options import IngestOptions
from ingestion.outcome import link_recoveries
from ingestion.shards import Shard, ShardWriter
from ingestion.sources import no_cyclic_gc, read_file
from ingestion.stats import IngestStats

if TYPE_CHECKING:
    from teachers.pseudonyms import Pseudonyms
    from teachers.redact_state import StateRedactor

# Below this many bytes of input, starting workers costs more than it saves (~0.3 s each).
MIN_PARALLEL_BYTES = 64 << 20
MAX_AUTO_WORKERS = 8
INPUT_AHEAD = 32 << 20   # bytes of input queued ahead per worker

Hit = tuple[str, str]    # (rule, secret digest), as teachers.redact_state counts them


@dataclass
class Redaction:
    """What a redactor counted over one file (added to the main process's redactor), and the distinct
    secrets of its first and last trace (the previous and next file may hold more of those traces)."""

    counts: Counter[str] = field(default_factory=Counter)
    states_token_ids_dropped: int = 0
    first: frozenset[Hit] = frozenset()
    last: frozenset[Hit] = frozenset()
    one_trace: bool = True     # every state of the file is in one trace (first and last are one)
    people: frozenset[str] = frozenset()   # the names found in its prose (replay/ingest/names_wide.py)


@dataclass
class FileResult:
    shard: Shard
    stats: IngestStats
    redaction: Redaction | None


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


# --- in a worker ------------------------------------------------------------------------------------

_CHANNEL: list[Connection] = []   # this worker's end of its pipe to the main process's Resolver


def _start_worker(ends: list[Connection], resolver_ends: list[Connection], slots: Any) -> None:
    """A worker takes one pipe of its own (the others, and the resolver's ends, are closed here: a
    worker waiting on a claim then sees the pipe close when the run stops)."""
    with slots.get_lock():
        slot = slots.value
        slots.value += 1
    for n, end in enumerate(ends):
        if n != slot:
            end.close()
    for end in resolver_ends:
        end.close()
    _CHANNEL.append(ends[slot])


class _Settled(Seen):
    """A worker's Seen: each claim is settled by the main process's Resolver, in file order."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def claim(self, claims: list[Claim], last: bool = False) -> list[Grant]:
        if not claims:
            if last:
                _CHANNEL[0].send(("done", self.index, None, False))
            return []
        _CHANNEL[0].send(("claim", self.index, claims, last))
        return _CHANNEL[0].recv()


def read_apart(index: int, path: Path, options: IngestOptions, key: bytes | None, redact: bool,
               pseudonyms: Pseudonyms | None = None, names: bool = False) -> FileResult:
    """One file of the run read, redacted and serialised in a worker (file `index` of the run)."""
    from teachers.redact_state import StateRedactor

    stats = IngestStats()
    writer = ShardWriter()
    redactor = StateRedactor(key, pseudonyms, names) if redact else None
    redaction = Redaction() if redact else None
    trace: str | None = None
    try:
        with no_cyclic_gc():
            for state in link_recoveries(read_file(path, options, stats, _Settled(index))):
                if redactor is not None and redaction is not None:
                    if state.trace_id != trace and trace is not None:   # the redactor starts a new trace
                        if redaction.one_trace:
                            redaction.first, redaction.one_trace = frozenset(redactor.hits), False
                    trace = state.trace_id
                    state = redactor(state)
                writer.write(state)
    finally:
        _CHANNEL[0].send(("done", index, None, False))
    if redactor is not None and redaction is not None:
        redaction.counts = redactor.counts
        redaction.states_token_ids_dropped = redactor.states_token_ids_dropped
        redaction.last = frozenset(redactor.hits)
        if redactor.people is not None:
            redaction.people = frozenset(redactor.people.found)
        if redaction.one_trace:
            redaction.first = redaction.last
    return FileResult(writer.shard(), stats, redaction)


# What a worker imports on its first file (readers are imported where they are needed).
_READERS = ("ingestion.claude_rollouts", "ingestion.detect", "ingestion.claude_code.agents",
            "teachers.redact_state", "teachers.secret_rules")


def warm(rules: bool = True) -> None:
    """The readers imported and (`rules`) the rules compiled and the prefilter loaded, before a first
    file. Once per process: what is done is not done again."""
    import importlib

    for name in _READERS:
        importlib.import_module(name)
    if rules:
        from teachers.secret_rules import rule_set

        rule_set()


# --- in the main process ----------------------------------------------------------------------------


class Resolver(threading.Thread):
    """Answers the workers' claims from the run's one `Seen`, in file order: file N's claims once files
    0..N-1 have made all theirs (a file says so with its last claim, or when it is read). Files are
    handed out in order, so the file every other waits on is being read, never waiting itself."""

    def __init__(self, ends: list[Connection]) -> None:
        super().__init__(name="claims", daemon=True)
        self.seen = Seen()
        self._ends = ends
        self._stop_reading, self._stop_writing = multiprocessing.Pipe(duplex=False)
        self._next = 0                                   # the first file still making claims
        self._done: set[int] = set()
        self._waiting: dict[int, list[tuple[Connection, list[Claim], bool]]] = {}

    def run(self) -> None:
        live = list(self._ends)
        try:
            while live:
                for end in wait([*live, self._stop_reading]):
                    if end is self._stop_reading:
                        return
                    try:
                        kind, index, claims, last = end.recv()   # type: ignore[union-attr]
                    except (EOFError, OSError):
                        live.remove(end)
                        continue
                    if kind == "claim":
                        self._waiting.setdefault(index, []).append((end, claims, last))   # type: ignore[arg-type]
                    elif index >= self._next:
                        self._done.add(index)
                    self._settle()
        finally:
            for end in self._ends:   # a worker still waiting on a claim sees its pipe close
                end.close()

    def _settle(self) -> None:
        while True:
            for end, claims, last in self._waiting.pop(self._next, ()):
                grants = self.seen.claim(claims)
                try:
                    end.send(grants)
                except OSError:   # its worker is gone: the pool is broken, the run says so
                    pass
                if last:
                    self._done.add(self._next)
            if self._next not in self._done:
                return
            self._done.discard(self._next)
            self._next += 1

    def stop(self) -> None:
        self._stop_writing.send(None)
        self.join()
        self._stop_writing.close()
        self._stop_reading.close()


@dataclass
class Workers:
    pool: ProcessPoolExecutor
    count: int
    ends: list[Connection]   # the Resolver's end of each worker's pipe


@contextmanager
def worker_pool(workers: int) -> Iterator[Workers]:
    """`workers` processes, started now: enter it before any thread of ours (the progress bar) runs.

    Forked on Linux when this process runs no other thread: a fork starts at once, with everything
    imported, and never imports the caller's main module again (spawn and forkserver do, which breaks a
    script without an `if __name__ == "__main__"` guard). With other threads alive (a library caller's),
    forking could copy a held lock: a fork server then starts clean processes instead (macOS too)."""
    methods = multiprocessing.get_all_start_methods()
    if sys.platform == "linux" and threading.active_count() == 1:
        context = multiprocessing.get_context("fork")
        warm()   # once here, not once per worker: forked workers share what it loaded and compiled
        gc.freeze()   # and their GC, on between files, leaves it alone (no copy of those pages)
    elif "forkserver" in methods:   # macOS forks badly (its system libraries), Linux with threads
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__, *_READERS])
    else:   # Windows
        context = multiprocessing.get_context("spawn")
    pipes = [context.Pipe() for _ in range(workers)]
    ends, resolver_ends = [p[1] for p in pipes], [p[0] for p in pipes]
    slots = context.Value("i", 0)
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker,
                                 initargs=(ends, resolver_ends, slots)) as pool:
            # The first submit starts every process (forked ones at once, in submit); a fork server's
            # compile the rules while this process lists and queues the files.
            for _ in range(workers):
                pool.submit(warm)
            yield Workers(pool, workers, resolver_ends)
    finally:
        gc.unfreeze()
        for end in ends + resolver_ends:
            end.close()


class _Counting:
    """The main process's redactor counts: each file's, less the secrets that a file's first trace
    found when it goes on from the trace an earlier file ended on (counted once per trace)."""

    def __init__(self, redactor: StateRedactor) -> None:
        self.redactor = redactor
        self.trace: str | None = None
        self.hits: frozenset[Hit] = frozenset()

    def add(self, redaction: Redaction, first: str, last: str) -> None:
        counts = self.redactor.counts
        counts.update(redaction.counts)
        self.redactor.states_token_ids_dropped += redaction.states_token_ids_dropped
        if self.redactor.people is not None:
            self.redactor.people.found |= redaction.people
        if first == self.trace:
            for kind, _digest in redaction.first & self.hits:
                counts[kind] -= 1
                if not counts[kind]:
                    del counts[kind]
            if redaction.one_trace:
                self.hits = self.hits | redaction.first
                return
        self.trace, self.hits = last, redaction.last


def parallel_shards(workers: Workers, files: list[Path], options: IngestOptions, stats: IngestStats,
                    redactor: StateRedactor | None,
                    on_file: Callable[[Path], None] | None = None) -> Iterator[Shard]:
    """Every state of `files`, redacted by (or as by) `redactor`, as one shard per file with states, in
    file order (`MergingWriter.write_shard`); `stats` and the redactor's counts as reading them in one
    process gives. Not for --max-states (it stops mid-file)."""
    if options.max_states is not None:
        raise ValueError("parallel_shards reads whole files: use ingestion.sources.iter_states")
    key = redactor.key if redactor is not None else None
    pseudonyms = redactor.pseudonyms if redactor is not None else None
    counting = _Counting(redactor) if redactor is not None else None
    resolver = Resolver(workers.ends)
    resolver.start()
    pending: list[tuple[Path, int, Future[FileResult]]] = []
    in_flight = 0   # input bytes of the pending files
    queue = enumerate(files)
    held: Shard | None = None   # the last file's states: the next file may recover its last state
    try:
        while True:
            # Files queued ahead keep the workers busy while this process waits on one file, up to
            # INPUT_AHEAD bytes per worker: their results wait here, about a quarter of their size.
            while len(pending) < 2 * workers.count + 2 or (in_flight < INPUT_AHEAD * workers.count
                                                            and len(pending) < 16 * workers.count):
                index, path = next(queue, (None, None))
                if path is None:
                    break
                size = _size(path)
                job = workers.pool.submit(read_apart, index, path, options, key, redactor is not None,
                                          pseudonyms, redactor is not None and redactor.people is not None)
                pending.append((path, size, job))
                in_flight += size
            if not pending:
                break
            path, size, future = pending.pop(0)
            in_flight -= size
            result = future.result()
            stats.add(result.stats)
            shard = result.shard
            if shard.count:
                if counting is not None and result.redaction is not None:
                    counting.add(result.redaction, shard.first[0], shard.last[0])
                if held is not None:
                    if held.last_failed and held.last[0] == shard.first[0]:
                        held = held.with_recovery(shard.first_state)
                    yield held
                held = shard
            if on_file is not None:
                on_file(path)
        if held is not None:
            yield held
    finally:
        for _path, _bytes, future in pending:
            future.cancel()
        resolver.stop()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0   # the worker says why (a counted skip)
