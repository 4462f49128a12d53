"""Content-addressed response cache in SQLite: a re-run, a resume or an ablation never pays twice.

Key = sha256 of the canonical JSON of everything that decides an answer (model, params, the messages
as sent, tools, sample index, prompt version); never the API key or endpoint. One row per answer,
committed as soon as it arrives, so a killed run keeps every answer it paid for.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from teachers.registry import safe_params

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
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
)
"""


class CacheEntry(BaseModel):
    """One stored answer: the raw response, the parsed action (or why it did not parse), usage."""

    model: str
    sample: int = 0
    response_json: str | None = None
    action_json: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    created: float = 0.0


def cache_key(model: str, params: dict[str, Any], messages: list[dict[str, Any]],
              tools: list[dict[str, Any]], sample: int, prompt_version: str) -> str:
    """sha256 hex of the canonical JSON (sorted keys) of what decides the answer.

    >>> a = cache_key("m", {"temperature": 0}, [{"role": "user", "content": "hi"}], [], 0, "v1")
    >>> same = [{"content": "hi", "role": "user"}]
    >>> a == cache_key("m", {"temperature": 0, "api_key": "k"}, same, [], 0, "v1")
    True
    >>> a == cache_key("m", {"temperature": 0}, [{"role": "user", "content": "hi"}], [], 1, "v1")
    False
    """
    payload = {"model": model, "params": safe_params(params), "messages": messages, "tools": tools,
               "sample": sample, "prompt_version": prompt_version}
    canonical = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def default_cache_path() -> Path:
    """`$REPLAY_CACHE`, else the user cache dir's `teacher-replay/cache.sqlite`."""
    if os.environ.get("REPLAY_CACHE"):
        return Path(os.environ["REPLAY_CACHE"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("teacher-replay")) / "cache.sqlite"


class ResponseCache:
    """The SQLite cache. Calls are synchronous: a WAL commit with synchronous=NORMAL takes ~40 µs
    (measured), cheaper than a hop to a thread, so asyncio tasks call it directly on the loop.
    A lock makes it safe from threads too; other processes share the file through WAL."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # autocommit mode: every INSERT is its own transaction, durable when execute() returns.
        self._db = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a killed process (what resume needs); only a power cut can lose
        # the last commits, and FULL costs 5x per answer (207 vs 41 µs, measured).
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)

    def get(self, key: str) -> CacheEntry | None:
        with self._lock:
            row = self._db.execute(
                "SELECT model, sample, response_json, action_json, error, prompt_tokens, completion_tokens,"
                " cost_usd, created FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return CacheEntry(model=row[0], sample=row[1], response_json=row[2], action_json=row[3],
                          error=row[4], prompt_tokens=row[5], completion_tokens=row[6], cost_usd=row[7],
                          created=row[8])

    def put(self, key: str, entry: CacheEntry) -> None:
        # First answer wins: a second process that raced on the same call keeps what others already read.
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO responses (key, model, sample, response_json, action_json, error,"
                " prompt_tokens, completion_tokens, cost_usd, created) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (key, entry.model, entry.sample, entry.response_json, entry.action_json, entry.error,
                 entry.prompt_tokens, entry.completion_tokens, entry.cost_usd, entry.created or time.time()))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
