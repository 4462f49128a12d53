"""The cache's SQLite file: opened and checked before any call, and one writer thread.

A damaged, foreign, unreadable or read-only file is one `CacheError` line at open, never a failed
call later. What SQLite can rebuild (an index out of step with its table, leaked pages) is rebuilt
with REINDEX and VACUUM, and said. Writes run on one thread, which commits every write queued while
the previous commit ran in one transaction: answers arriving together cost one commit, and no
commit (nor a wait on another process's write lock) ever runs on the event loop.
"""

from __future__ import annotations

import itertools
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ingestion.schema import ReplayError

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    sample INTEGER NOT NULL,
    response_json TEXT,
    action_json TEXT,
    error TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0.0,
    created REAL NOT NULL
)""",
    # One row per call in flight: who asks (a token per open cache, its pid and host) and until when.
    """CREATE TABLE IF NOT EXISTS inflight (
    key TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    expires REAL NOT NULL
)""",
)
_COLUMNS = {"key", "model", "sample", "response_json", "action_json", "error", "prompt_tokens",
            "completion_tokens", "cost_usd", "created"}
_LOCK_WAIT = 30.0  # seconds a write waits for another process's write lock
_REOPEN_WAIT = 0.05


class CacheError(ReplayError):
    """The cache cannot be opened, read or written: the run stops (exit 1) rather than pay blind."""


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, synchronous=NORMAL.

    NORMAL in WAL mode survives a killed process (what resume needs); only a power cut can lose the
    last commits, and FULL costs 5x per commit (207 vs 41 µs, measured).
    """
    db = sqlite3.connect(str(path), timeout=_LOCK_WAIT, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        db.close()
        raise
    return db


def explain(path: Path, error: BaseException) -> str:
    """One line saying what is wrong with the cache file and what to do.

    >>> explain(Path("c.sqlite"), sqlite3.DatabaseError("file is not a database"))
    'cache c.sqlite is not a SQLite database (file is not a database): move it away or pass another --cache'
    """
    text = str(error)
    if "not a database" in text:
        return f"cache {path} is not a SQLite database ({text}): move it away or pass another --cache"
    if "malformed" in text or "corrupt" in text:
        return (f"cache {path} is damaged ({text}) and SQLite cannot rebuild it: move it away or pass "
                f"another --cache (`sqlite3 {path} .recover | sqlite3 NEW.sqlite` may save its answers)")
    if "readonly" in text or "read-only" in text:
        return f"cache {path} is read-only ({text}): make it writable or pass another --cache"
    if "unable to open" in text:
        return (f"cache {path} cannot be opened ({text}): check that its folder exists and is writable, "
                f"or pass another --cache")
    if "locked" in text or "busy" in text:
        return f"cache {path} stayed locked by another process for {_LOCK_WAIT:.0f} s ({text})"
    return f"cache {path} cannot be used ({text})"


def open_checked(path: Path, check: bool = True) -> tuple[sqlite3.Connection, str | None]:
    """(connection, notice): a cache file checked whole (unless not `check`: a second connection to a
    file just checked) and writable; notice says what SQLite repaired, None when nothing was wrong.
    Raises CacheError."""
    if str(path) != ":memory:":
        if path.is_dir():
            raise CacheError(f"cache {path} is a folder, not a SQLite file: pass --cache FILE")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise CacheError(f"cache {path}: its folder cannot be created ({error.strerror})") from error
    for waited in itertools.count():
        try:
            return _open_once(path, check)
        except sqlite3.OperationalError as error:
            # Two runs creating one cache at once: SQLite refuses one of them at once (no busy wait,
            # to avoid a deadlock) while the other switches the file to WAL. Ask again, briefly.
            if "locked" not in str(error) or waited * _REOPEN_WAIT >= _LOCK_WAIT:
                raise CacheError(explain(path, error)) from error
            time.sleep(_REOPEN_WAIT)
        except sqlite3.Error as error:
            raise CacheError(explain(path, error)) from error
    raise AssertionError("unreachable")


def _open_once(path: Path, check: bool) -> tuple[sqlite3.Connection, str | None]:
    db = connect(path)
    try:
        notice = _repair(db, path) if check else None
        _check_tables(db, path)
        for statement in SCHEMA:
            db.execute(statement)
        # A real write (leases long expired), so a file that cannot be written fails now, not at the
        # first answer (WAL lets a read-only file begin a transaction; only a write is refused).
        db.execute("DELETE FROM inflight WHERE expires < ?", (time.time() - 86400,))
    except BaseException:
        db.close()
        raise
    return db, notice


def _integrity(db: sqlite3.Connection) -> list[str]:
    rows = [line for (text,) in db.execute("PRAGMA integrity_check(20)") for line in text.splitlines()]
    return [] if rows == ["ok"] else [r for r in rows if not r.startswith("***")]


def _repair(db: sqlite3.Connection, path: Path) -> str | None:
    """Every page read back; an index or free-page list out of step is rebuilt, anything else raises."""
    problems = _integrity(db)
    if not problems:
        return None
    try:
        db.execute("REINDEX")
        db.execute("VACUUM")
        left = _integrity(db)
    except sqlite3.Error as error:
        left = [str(error)]
    if left:
        damage = sqlite3.DatabaseError(f"database disk image is malformed: {problems[0]}")
        raise CacheError(explain(path, damage))
    kept = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] if "responses" in _tables(db) else 0
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    return (f"cache {path} was damaged ({problems[0]}{more}); SQLite rebuilt it (REINDEX, VACUUM) and "
            f"kept its {kept} answers")


def _tables(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _check_tables(db: sqlite3.Connection, path: Path) -> None:
    """A SQLite file of something else is refused, not written into."""
    tables = _tables(db) - {"inflight"}
    if tables and "responses" not in tables:
        raise CacheError(f"cache {path} is a SQLite database of something else (tables: "
                         f"{', '.join(sorted(tables)[:5])}): pass another --cache")
    if "responses" in tables:
        columns = {row[1] for row in db.execute("PRAGMA table_info(responses)")}
        if missing := _COLUMNS - columns:
            raise CacheError(f"cache {path} is not a teacher-replay cache (its responses table lacks "
                             f"{', '.join(sorted(missing))}): pass another --cache")


class Writer:
    """Runs write operations on one thread, each batch of queued operations in one transaction."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock, path: Path) -> None:
        self._db, self._lock, self._path = db, lock, path
        self._queue: queue.SimpleQueue[tuple[Callable[[sqlite3.Connection], Any], Future] | None] = \
            queue.SimpleQueue()
        self._broken: CacheError | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._serve, name="cache-writer", daemon=True)
        self._thread.start()

    def run(self, operation: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run `operation(db)` in the writer's next transaction; returns its result once committed."""
        if self._broken is not None:
            raise self._broken
        if self._stopped:  # a call answered after the run was stopped (Ctrl-C): nothing to write to
            raise CacheError(f"cache {self._path} is closed")
        future: Future = Future()
        self._queue.put((operation, future))
        return future.result()

    def stop(self) -> None:
        self._stopped = True
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        with self._lock:
            self._db.close()

    def _serve(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            jobs = [job for job in batch if job is not None]
            if jobs:
                self._commit(jobs)
            if len(jobs) < len(batch):
                return

    def _commit(self, jobs: list[tuple[Callable[[sqlite3.Connection], Any], Future]]) -> None:
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    results = [operation(self._db) for operation, _ in jobs]
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    raise
        except sqlite3.Error as error:
            self._broken = CacheError(explain(self._path, error))
            for _, future in jobs:
                future.set_exception(self._broken)
            return
        except Exception as error:  # a bug in one operation: fail its batch, keep the thread
            for _, future in jobs:
                future.set_exception(error)
            return
        for (_, future), result in zip(jobs, results, strict=True):
            future.set_result(result)
