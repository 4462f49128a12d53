"""A run that fails says so (#14): cache faults, failed states, the budget, malformed answers, flags.

Every test drives `replay.run` through its CLI entry point against loopback servers that inject the
faults, and checks what a user sees: the exit code, one line on stderr, what OUT holds afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from replay.run import main
from tests.cli import pool, snapshot, stored_keys
from tests.llm_server import LLMServer, Reply, chat_completion
from tests.teacher_script import request_key, scripted

SMALL = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"  # 4 states, student claude-opus-4-6


@pytest.fixture
def session(fixtures_root: Path) -> Path:
    return next(fixtures_root.rglob(f"{SMALL}.jsonl"))


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """(exit code, stderr) of `python -m replay.run ARGS`, argparse's SystemExit included."""
    try:
        code = main(list(args))
    except SystemExit as done:
        code = int(done.code or 0)
    return code, capsys.readouterr().err


def first_run(session: Path, out: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """A good run into OUT; returns OUT's files, to compare after a failed run."""
    with LLMServer(scripted) as server:
        code, err = cli(capsys, "--source", str(session), "--out", str(out), "--cache", str(cache),
                        "--teachers", pool(server.url, "ta", "tb"))
    assert code == 0, err
    assert (out / "dataset").is_dir() and (out / "report.json").is_file()
    return snapshot(out)


# --- 1. cache faults ---------------------------------------------------------------------------------

@pytest.fixture
def immutable() -> Iterator[Callable[[Path], None]]:
    """Make a file read-only for this process, root included (chattr +i); undone afterwards."""
    made: list[Path] = []

    def make(path: Path) -> None:
        if os.geteuid() != 0:
            path.chmod(0o444)
            return
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode:
            pytest.skip("running as root without chattr: cannot make a file read-only")
        made.append(path)

    yield make
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def _damage(kind: str, good: Path, bad: Path, immutable: Callable[[Path], None]) -> None:
    data = good.read_bytes()
    if kind == "garbage":
        bad.write_bytes(os.urandom(8192))
    elif kind == "truncated":
        bad.write_bytes(data[: len(data) // 2])
    elif kind == "corrupt_pages":  # every page after the first (schema) page overwritten
        bad.write_bytes(data[:4096] + b"\xab" * (len(data) - 4096))
    elif kind == "directory":
        bad.mkdir()
    elif kind == "read_only":
        bad.write_bytes(data)
        immutable(bad)
    elif kind == "foreign":
        with sqlite3.connect(bad) as db:
            db.execute("CREATE TABLE users (name TEXT)")


@pytest.mark.parametrize(("kind", "says"), [
    ("garbage", "is not a SQLite database"), ("truncated", "is damaged"), ("corrupt_pages", "is damaged"),
    ("directory", "is a folder"), ("read_only", "is read-only"), ("foreign", "of something else")])
def test_cache_fault_is_one_line_exit_1_before_any_call(session: Path, tmp_path: Path, kind: str, says: str,
                                                        capsys: pytest.CaptureFixture[str],
                                                        immutable: Callable[[Path], None]) -> None:
    out, good = tmp_path / "out", tmp_path / "good.sqlite"
    before = first_run(session, out, good, capsys)
    assert good.stat().st_size > 3 * 4096  # pages to damage
    bad = tmp_path / "bad.sqlite"
    _damage(kind, good, bad, immutable)
    with LLMServer(scripted) as server:
        code, err = cli(capsys, "--source", str(session), "--out", str(out), "--cache", str(bad),
                        "--teachers", pool(server.url, "ta", "tb"))
        assert server.requests == []  # not one call
    assert code == 1 and err.count("\n") == 1 and err.startswith("error: cache ") and says in err, err
    assert "Traceback" not in err
    assert snapshot(out) == before  # the earlier dataset, report and states are as they were


def test_cache_sqlite_can_rebuild_is_rebuilt_and_said(session: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
    first_run(session, out, cache, capsys)
    answers = stored_keys(cache)
    with sqlite3.connect(cache, isolation_level=None) as db:  # the key index loses every row
        db.execute("CREATE TABLE other (x TEXT)")
        db.execute("CREATE INDEX empty ON other (x)")
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'empty'").fetchone()[0]
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_master SET rootpage = ? WHERE name = ?",
                   (root, "sqlite_autoindex_responses_1"))
        db.execute("DELETE FROM sqlite_master WHERE name IN ('other', 'empty')")
    with sqlite3.connect(cache) as db:  # a lookup by key now finds nothing: a miss, paid again
        assert db.execute("SELECT COUNT(*) FROM responses WHERE key = ?", (min(answers),)).fetchone()[0] == 0
    with LLMServer(scripted) as server:
        code, err = cli(capsys, "--source", str(session), "--out", str(out), "--cache", str(cache),
                        "--teachers", pool(server.url, "ta", "tb"))
        assert server.requests == []  # every answer found again
    assert code == 0 and "SQLite rebuilt it" in err and f"kept its {len(answers)} answers" in err
    assert stored_keys(cache) == answers


# --- 2. failed states, --max-failed, the budget -------------------------------------------------------

def test_all_calls_failing_is_failed_exit_1_and_out_untouched(session: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
    before = first_run(session, out, tmp_path / "first.sqlite", capsys)
    refused = lambda body: Reply({"error": {"message": "invalid key"}}, status=401)  # noqa: E731
    with LLMServer(refused) as server:
        code, err = cli(capsys, "--source", str(session), "--out", str(out), "--cache", str(cache),
                        "--teachers", pool(server.url, "ta", "tb"))
    assert code == 1 and err.count("\n") == 1 and "4 of 4 states failed" in err and "auth: 8" in err, err
    assert snapshot(out) == before
    report = json.loads((out / ".replay-failed" / "report.json").read_text())
    assert report["states_failed"] == report["states"] == 4 and report["consensus"]["abstained"] == 0
    assert stored_keys(cache) == set()


def test_some_failed_states_under_max_failed_are_counted_and_sum(session: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """One state's calls all fail; the other three are answered: 25% failed."""
    doomed: set[str] = set()
    lock = threading.Lock()

    def responder(body: dict) -> Reply:
        prompt = json.dumps(body["messages"])
        with lock:
            fail = not doomed or prompt in doomed
            doomed.add(prompt) if fail else None
        return Reply({"error": {"message": "nope"}}, status=400) if fail else scripted(body)

    out = tmp_path / "out"
    with LLMServer(responder) as server:
        args = ["--source", str(session), "--out", str(out), "--teachers", pool(server.url, "ta", "tb")]
        code, err = cli(capsys, *args)
        assert code == 1 and "1 of 4 states failed (25%" in err and snapshot(out) == {}
        code, err = cli(capsys, *args, "--max-failed", "0.25")
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["states_failed"] == 1 and report["teacher_calls"]["failed"] == 2
    assert report["states"] == (report["states_all_teachers_excluded"] + report["states_failed"]
                                + report["consensus"]["abstained"] + report["agree"] + report["pairs"])


def test_budget_spent_is_said_and_never_an_empty_dataset(session: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Priced as gpt-4o (litellm's map): one answer billed 1M prompt tokens spends the $1 budget."""
    out = tmp_path / "out"
    before = first_run(session, out, tmp_path / "first.sqlite", capsys)
    priced = lambda body: Reply(chat_completion(  # noqa: E731
        tool_calls=[{"name": "Bash", "arguments": {"command": "ls"}}], prompt_tokens=1_000_000))
    cache = tmp_path / "cache.sqlite"
    with LLMServer(priced) as server:
        args = ["--source", str(session), "--out", str(out), "--cache", str(cache),
                "--teachers", pool(server.url, "gpt-4o") + "#price=gpt-4o", "--concurrency", "1",
                "--max-cost", "1"]
        code, err = cli(capsys, *args)
        assert len(server.requests) == 1
    assert code == 1 and "3 of 4 states failed" in err and "3 of them because --max-cost" in err, err
    assert snapshot(out) == before
    report = json.loads((out / ".replay-failed" / "report.json").read_text())
    assert (report["states_failed"], report["states_budget_stopped"]) == (3, 3)
    assert report["teacher_calls"]["budget_exhausted"] == 3 and len(stored_keys(cache)) == 1


# --- 3. malformed answers are asked again, never frozen ---------------------------------------------

def test_transient_malformed_answer_is_retried_not_frozen(session: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, int] = {}

    def garbles_first(body: dict) -> Reply:
        key = request_key(body)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 1:
            return Reply(chat_completion(tool_calls=[{"name": "Bash", "arguments": '{"command": "ls'}]))
        return scripted(body)

    out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
    with LLMServer(garbles_first) as server:
        code, err = cli(capsys, "--source", str(session), "--out", str(out), "--cache", str(cache),
                        "--teachers", pool(server.url, "ta", "tb"))
        assert code == 0, err
        assert len(server.requests) == 16  # each of the 8 calls answered twice: garbled, then good
    report = json.loads((out / "report.json").read_text())
    calls = report["teacher_calls"]
    assert (calls["made"], calls["invalid"], calls["retries"], calls["failed"]) == (16, 0, 8, 0)
    assert report["states_failed"] == 0 and len(stored_keys(cache)) == 8
    proposals = [json.loads(line) for line in (out / "proposals.jsonl").read_text().splitlines()]
    assert all(p["action"] and p["error"] is None for p in proposals)


# --- 6. flags ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("flags", "says"), [
    (["--concurrency", "0"], "--concurrency: must be an integer >= 1"),
    (["--per-teacher", "-2"], "--per-teacher: must be an integer >= 1"),
    (["--samples", "0"], "--samples: must be an integer >= 1"),
    (["--timeout", "0"], "--timeout: must be a number > 0"),
    (["--timeout", "inf"], "--timeout: 'inf' is not a finite number"),
    (["--max-cost", "nan"], "--max-cost: 'nan' is not a finite number"),
    (["--max-cost", "-1"], "--max-cost: must be an amount >= 0"),
    (["--max-states", "-1"], "--max-states: must be an integer >= 1"),
    (["--max-states", "1.5"], "--max-states: '1.5' is not an integer"),
    (["--min-agreement", "2"], "--min-agreement: must be in [0, 1)"),
    (["--min-agreement", "1"], "--min-agreement: must be in [0, 1)"),
    (["--max-failed", "1.5"], "--max-failed: must be in [0, 1]"),
    (["--max-message-chars", "0"], "--max-message-chars: must be an integer >= 100"),
    (["--max-prompt-tokens", "ten"], "--max-prompt-tokens: 'ten' is not an integer"),
])
def test_bad_flag_is_one_line_exit_2_before_any_work(session: Path, tmp_path: Path, flags: list[str],
                                                     says: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    with LLMServer(scripted) as server:
        code, err = cli(capsys, "--source", str(session), "--out", str(out), "--teachers",
                        pool(server.url, "ta"), *flags)
        assert server.requests == []
    assert code == 2 and err.count("\n") == 1 and says in err, err
    assert not out.exists() and not (tmp_path / "cache.sqlite").exists()


def test_out_that_is_a_file_or_unwritable_is_one_line_exit_2(session: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str],
                                                            immutable: Callable[[Path], None]) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    code, err = cli(capsys, "--source", str(session), "--out", str(a_file), "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "is a file, not a folder" in err, err
    locked = tmp_path / "locked"
    locked.mkdir()
    immutable(locked)
    code, err = cli(capsys, "--source", str(session), "--out", str(locked / "out"), "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "cannot be written" in err, err
    assert a_file.read_text() == "mine"
