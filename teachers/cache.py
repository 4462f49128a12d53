"""Content-addressed response cache in SQLite: a re-run, a resume or an ablation never pays twice.

Key = sha256 of the canonical JSON of everything that decides an answer (model, params, the messages
as sent, tools, sample index, prompt version); never the API key or endpoint. Only definitive answers
are stored, each committed as soon as it arrives (by one writer thread that groups the commits of
answers arriving together), so a killed run keeps every answer it paid for.

Several runs may share one cache: before a call, a run takes a lease on its key (`inflight`: holder,
pid, host, expiry). A run that finds the key leased by another live process waits for that answer
instead of paying for it again; a lease whose holder died (kill -9) or expired is taken over.

A cache that cannot be opened, read or written is a `CacheError` (one line; the run stops before any
call), never a failed call: `open_checked` repairs what SQLite can rebuild and says so in `notice`.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel

from teachers.cache_store import CacheError, Writer, open_checked
from teachers.registry import safe_params

__all__ = ["CacheEntry", "CacheError", "Lease", "ResponseCache", "cache_key", "default_cache_path"]

_FIELDS = ("model", "sample", "response_json", "action_json", "error", "prompt_tokens", "completion_tokens",
           "cost_usd", "created")
_SELECT = f"SELECT key, {', '.join(_FIELDS)} FROM responses WHERE error IS NULL AND key IN "
# A row with an error is not an answer (older versions stored malformed answers as final): it is
# asked again, and the answer replaces it. A definitive row is never replaced: first answer wins.
_UPSERT = (f"INSERT INTO responses (key, {', '.join(_FIELDS)}) VALUES (?,?,?,?,?,?,?,?,?,?) "
           f"ON CONFLICT(key) DO UPDATE SET {', '.join(f'{f} = excluded.{f}' for f in _FIELDS)} "
           f"WHERE responses.error IS NOT NULL")
_HOST = socket.gethostname()
_OPEN_HOLDERS: set[str] = set()  # the lease holders of this process's open caches

Lease = Literal["mine", "hit", "busy"]  # taken by us | the answer is there | another live run is asking


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


def holder_alive(pid: int, host: str, holder: str) -> bool:
    """Whether a lease's holder may still be asking. Another host's process cannot be checked (its
    lease expires instead); in this process, only caches still open are; else the pid must exist.

    >>> holder_alive(os.getpid(), _HOST, "closed long ago"), holder_alive(2**22 + 7, _HOST, "x")
    (False, False)
    """
    if host != _HOST:
        return True
    if pid == os.getpid():  # ours, or a dead process's whose pid we were given
        return holder in _OPEN_HOLDERS
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


class ResponseCache:
    """The SQLite cache. Reads are synchronous and thread-safe (callers run them off the event loop);
    writes go through one writer thread; other processes share the file through WAL."""

    def __init__(self, path: str | Path | None = None, *, lease_seconds: float = 900.0) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.lease_seconds = lease_seconds
        self.holder = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        _OPEN_HOLDERS.add(self.holder)
        self._lock = threading.Lock()
        self._db, self.notice = open_checked(self.path)
        if str(self.path) == ":memory:":  # one database per connection: share it
            self._writer = Writer(self._db, self._lock, self.path)
        else:
            try:
                self._writer = Writer(open_checked(self.path, check=False)[0], threading.Lock(), self.path)
            except CacheError:
                self._db.close()
                raise

    # --- reads -------------------------------------------------------------------------------------

    def get(self, key: str) -> CacheEntry | None:
        """The definitive answer stored under `key`, or None."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: list[str]) -> dict[str, CacheEntry]:
        if not keys:
            return {}
        marks = ",".join("?" * len(set(keys)))
        try:
            with self._lock:
                rows = self._db.execute(f"{_SELECT}({marks})", sorted(set(keys))).fetchall()
        except sqlite3.Error as error:
            raise CacheError(f"cache {self.path} cannot be read ({error})") from error
        return {row[0]: CacheEntry(**dict(zip(_FIELDS, row[1:], strict=True))) for row in rows}

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses WHERE error IS NULL").fetchone()[0]

    # --- writes (blocking until committed; call them off the event loop) ---------------------------

    def put(self, key: str, entry: CacheEntry) -> None:
        """Store a definitive answer (and drop our lease on it), committed when this returns."""
        row = (key, *(getattr(entry, f) for f in _FIELDS[:-1]), entry.created or time.time())

        def write(db: sqlite3.Connection) -> None:
            db.execute(_UPSERT, row)
            db.execute("DELETE FROM inflight WHERE key = ? AND holder = ?", (key, self.holder))

        self._writer.run(write)

    def lease(self, key: str) -> Lease:
        """Take the lease on `key` unless the answer is already there or a live run holds it."""
        def take(db: sqlite3.Connection) -> Lease:
            state = self._state(db, key)
            if state == "free":
                db.execute("INSERT OR REPLACE INTO inflight (key, holder, pid, host, expires) "
                           "VALUES (?,?,?,?,?)",
                           (key, self.holder, os.getpid(), _HOST, time.time() + self.lease_seconds))
                return "mine"
            return state

        return self._writer.run(take)

    def lease_state(self, key: str) -> Lease | Literal["free"]:
        """What `lease` would find, without taking anything: "hit", "busy", or "free"."""
        try:
            with self._lock:
                return self._state(self._db, key)
        except sqlite3.Error as error:
            raise CacheError(f"cache {self.path} cannot be read ({error})") from error

    def _state(self, db: sqlite3.Connection, key: str) -> Literal["hit", "busy", "free"]:
        if db.execute("SELECT 1 FROM responses WHERE key = ? AND error IS NULL", (key,)).fetchone():
            return "hit"
        row = db.execute("SELECT holder, pid, host, expires FROM inflight WHERE key = ?", (key,)).fetchone()
        if row and row[0] != self.holder and row[3] > time.time() and holder_alive(row[1], row[2], row[0]):
            return "busy"
        return "free"

    def release(self, key: str) -> None:
        """Give a lease back without an answer (the call failed): another run may ask."""
        self._writer.run(lambda db: db.execute("DELETE FROM inflight WHERE key = ? AND holder = ?",
                                               (key, self.holder)))

    def close(self) -> None:
        """Commit what is queued, give back every lease still held, close both connections."""
        try:
            self._writer.run(lambda db: db.execute("DELETE FROM inflight WHERE holder = ?", (self.holder,)))
        except CacheError:
            pass  # closing after a fault: the leases expire (or their dead holder is seen)
        finally:
            _OPEN_HOLDERS.discard(self.holder)
            self._writer.stop()
            with self._lock:
                self._db.close()  # a second close of a shared :memory: connection does nothing

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
