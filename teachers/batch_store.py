"""Submitted batches, kept in the response cache's SQLite file (tables of their own), so that a killed
`--batch` run resumes by polling the batches it already submitted and never submits a request twice.

A batch and the cache keys of its requests are committed in one transaction as soon as the provider
has returned the batch id. Answers go to the response cache itself; a batch is marked `collected` once
they are all there, or `failed` / `expired` / `cancelled` (its requests are then asked again).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    api_base TEXT NOT NULL DEFAULT '',
    teacher TEXT NOT NULL,
    status TEXT NOT NULL,
    requests INTEGER NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_requests (
    key TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    sample INTEGER NOT NULL,
    PRIMARY KEY (key, batch_id)
);
CREATE INDEX IF NOT EXISTS batch_requests_by_batch ON batch_requests (batch_id);
"""
OPEN = "submitted"


@dataclass(frozen=True)
class Batch:
    batch_id: str
    provider: str
    model: str
    api_base: str
    teacher: str
    status: str
    requests: int


class BatchStore:
    """The batches table on a cache file (its own connection; WAL lets it share the file)."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def record(self, batch: Batch, keys: list[tuple[str, int]]) -> None:
        """A batch the provider accepted, with its requests' (cache key, sample): one transaction."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("INSERT OR REPLACE INTO batches VALUES (?,?,?,?,?,?,?,?)",
                                 (batch.batch_id, batch.provider, batch.model, batch.api_base, batch.teacher,
                                  batch.status, batch.requests, time.time()))
                self._db.executemany("INSERT OR IGNORE INTO batch_requests VALUES (?,?,?)",
                                     [(key, batch.batch_id, sample) for key, sample in keys])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def open_batches(self) -> list[Batch]:
        """Batches submitted and not yet collected, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT batch_id, provider, model, api_base, teacher, status, requests "
                                    "FROM batches WHERE status = ? ORDER BY created", (OPEN,)).fetchall()
        return [Batch(*row) for row in rows]

    def open_keys(self) -> dict[str, str]:
        """Cache key → the open batch that will answer it."""
        with self._lock:
            rows = self._db.execute("SELECT r.key, r.batch_id FROM batch_requests r JOIN batches b "
                                    "ON b.batch_id = r.batch_id WHERE b.status = ?", (OPEN,)).fetchall()
        return dict(rows)

    def requests(self, batch_id: str) -> dict[str, int]:
        """A batch's requests: cache key → sample."""
        with self._lock:
            rows = self._db.execute("SELECT key, sample FROM batch_requests WHERE batch_id = ?",
                                    (batch_id,)).fetchall()
        return dict(rows)

    def mark(self, batch_id: str, status: str) -> None:
        with self._lock:
            self._db.execute("UPDATE batches SET status = ? WHERE batch_id = ?", (status, batch_id))

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM batches").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
