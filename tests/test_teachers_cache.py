"""The SQLite response cache: keys, durability across a killed process, no secrets, default path."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from teachers.cache import CacheEntry, ResponseCache, cache_key, default_cache_path

ROOT = Path(__file__).resolve().parents[1]
MESSAGES = [{"role": "user", "content": "hi"}]


def test_key_is_canonical_and_ignores_credentials_and_transport() -> None:
    base = cache_key("openai/m", {"temperature": 0, "max_tokens": 9}, MESSAGES, [], 0, "v1")
    same = cache_key("openai/m", {"max_tokens": 9, "temperature": 0, "api_key": "sk-test-SECRET123",
                                  "timeout": 3, "extra_headers": {"Authorization": "x"}},
                     [{"content": "hi", "role": "user"}], [], 0, "v1")
    assert base == same and len(base) == 64
    for changed in (cache_key("openai/n", {"temperature": 0, "max_tokens": 9}, MESSAGES, [], 0, "v1"),
                    cache_key("openai/m", {"temperature": 1, "max_tokens": 9}, MESSAGES, [], 0, "v1"),
                    cache_key("openai/m", {"temperature": 0, "max_tokens": 9}, MESSAGES, [{"a": 1}], 0, "v1"),
                    cache_key("openai/m", {"temperature": 0, "max_tokens": 9}, MESSAGES, [], 1, "v1"),
                    cache_key("openai/m", {"temperature": 0, "max_tokens": 9}, MESSAGES, [], 0, "v2")):
        assert changed != base


def test_answer_survives_a_killed_process(tmp_path: Path) -> None:
    path = tmp_path / "killed.sqlite"
    script = textwrap.dedent(f"""
        import os, signal
        from teachers.cache import CacheEntry, ResponseCache
        cache = ResponseCache({str(path)!r})
        cache.put("k1", CacheEntry(model="m", action_json='{{"content": "paid for"}}', prompt_tokens=7))
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no atexit: what a crash or kill -9 leaves
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    entry = ResponseCache(path).get("k1")
    assert entry is not None and entry.action_json == '{"content": "paid for"}' and entry.prompt_tokens == 7


def test_first_answer_wins_and_wal_is_on(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    one, two = ResponseCache(path), ResponseCache(path)  # two connections, as two processes would hold
    one.put("k", CacheEntry(model="m", action_json='{"content": "first"}'))
    two.put("k", CacheEntry(model="m", action_json='{"content": "second"}'))
    assert two.get("k").action_json == '{"content": "first"}' and len(one) == 1
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert one.get("missing") is None


def test_default_path_follows_replay_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("REPLAY_CACHE", str(tmp_path / "env" / "x.sqlite"))
    assert default_cache_path() == tmp_path / "env" / "x.sqlite"
    assert ResponseCache().path == tmp_path / "env" / "x.sqlite" and (tmp_path / "env").is_dir()
    monkeypatch.delenv("REPLAY_CACHE")
    assert default_cache_path().parts[-2:] == ("teacher-replay", "cache.sqlite")


def test_runs_creating_one_cache_at_once_all_open_it(tmp_path: Path) -> None:
    """SQLite refuses one of two connections switching a new file to WAL at once (no busy wait, to
    avoid a deadlock); the cache asks again instead of failing the run."""
    path, start = tmp_path / "new.sqlite", tmp_path / "go"
    script = textwrap.dedent(f"""
        import os, time
        from teachers.cache import ResponseCache
        while not os.path.exists({str(start)!r}):
            time.sleep(0.001)
        ResponseCache({str(path)!r}).close()
    """)
    children = [subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stderr=subprocess.PIPE)
                for _ in range(6)]
    time.sleep(2)  # let them all reach the start line (a slow start only makes the race milder)
    start.write_text("go")
    errors = [child.communicate(timeout=120)[1].decode() for child in children]
    assert [child.returncode for child in children] == [0] * 6, errors
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
