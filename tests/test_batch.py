"""`--batch` end to end against the loopback batch API (tests/batch_server.py): OpenAI Batch and Anthropic
Message Batches through litellm, half price, answers in the response cache, and a kill -9 after
submission resumed by polling the same batches."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replay.run import main
from tests.batch_server import BatchServer
from tests.teacher_script import scripted

ROOT = Path(__file__).resolve().parents[1]
SESSION = "03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"  # 9 states


def teachers(server: BatchServer, anthropic: bool = True) -> str:
    entries = [f"gpt-5=openai/gpt-5@{server.url}#price=gpt-5",
               f"ds=deepseek/deepseek-chat@{server.url}#price=deepseek/deepseek-chat"]  # no batch API
    if anthropic:
        entries.append(f"claude=anthropic/claude-sonnet-4-6@{server.url.removesuffix('/v1')}"
                       f"#price=anthropic/claude-sonnet-4-6")
    return ",".join(entries)


def args(source: Path, out: Path, pool: str, *extra: str) -> list[str]:
    # the sessions' student is Claude: let the Anthropic teacher vote too
    return ["--source", str(source), "--out", str(out), "--teachers", pool, "--allow-same-family",
            "--cache", str(out.parent / f"{out.name}.sqlite"), *extra]


def rows(out: Path) -> list[dict[str, Any]]:
    """The dataset's rows without `cost_usd`, which a batch halves on purpose."""
    from datasets import load_from_disk

    return [{k: v for k, v in row.items() if k != "cost_usd"} for row in load_from_disk(str(out / "dataset"))]


def report(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def test_batch_run_is_a_direct_run_at_half_price(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob(SESSION))
    with BatchServer(scripted, hold=False) as server:
        assert main(args(session, tmp_path / "direct", teachers(server))) == 0
        direct_calls = server.direct
        batch = ["--batch", "--batch-poll", "0.01"]
        assert main(args(session, tmp_path / "batched", teachers(server), *batch)) == 0
    states = report(tmp_path / "direct")["states"]
    assert direct_calls == 3 * states and server.direct - direct_calls == states  # only deepseek directly
    assert server.created == 2 and server.uploads == 1  # one OpenAI batch (a file) and one Anthropic batch
    batched, direct = report(tmp_path / "batched"), report(tmp_path / "direct")
    assert batched["extra"]["batch"] == {"submitted": 2, "resumed": 0, "requests": 2 * states,
                                         "answered": 2 * states, "unanswered": 0, "over_budget": 0,
                                         "direct": ["ds"]}
    assert rows(tmp_path / "batched") == rows(tmp_path / "direct") and rows(tmp_path / "direct")
    assert batched["teacher_calls"]["made"] == direct["teacher_calls"]["made"] == 3 * states
    for name in ("gpt-5", "claude"):
        paid = batched["extra"]["per_teacher"][name]
        assert paid["batched"] == states and paid["cached"] == 0
        assert paid["cost_usd"] == pytest.approx(direct["extra"]["per_teacher"][name]["cost_usd"] / 2)
    deepseek = [r["extra"]["per_teacher"]["ds"]["cost_usd"] for r in (batched, direct)]
    assert deepseek[0] == deepseek[1] > 0


def test_a_rerun_after_a_batch_run_is_served_from_the_cache(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob(SESSION))
    with BatchServer(scripted, hold=False) as server:
        out, pool = tmp_path / "run", teachers(server, anthropic=False)
        assert main(args(session, out, pool, "--batch", "--batch-poll", "0")) == 0
        seen = (server.created, server.direct)
        assert main(args(session, out, pool, "--batch", "--batch-poll", "0")) == 0
        assert (server.created, server.direct) == seen
    assert report(out)["teacher_calls"]["made"] == 0 and report(out)["extra"]["batch"]["submitted"] == 0


def test_kill_9_after_submission_then_rerun_submits_nothing(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob(SESSION))
    with BatchServer(scripted, hold=True) as server:
        pool = teachers(server)
        cache = tmp_path / "batched.sqlite"
        command = args(session, tmp_path / "batched", pool, "--batch", "--batch-poll", "0.05")
        victim = subprocess.Popen([sys.executable, "-m", "replay.run", *command], cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and _stored_batches(cache) < 2:
            time.sleep(0.05)
        time.sleep(0.3)  # the run is polling now: batches held in progress
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        assert _stored_batches(cache) == 2 and server.created == 2
        submitted, uploads = server.created, server.uploads
        server.release()
        assert main(args(session, tmp_path / "batched", pool, "--batch", "--batch-poll", "0.01")) == 0
        assert (server.created, server.uploads) == (submitted, uploads)  # nothing submitted twice
        assert main(args(session, tmp_path / "direct", pool)) == 0
    resumed = report(tmp_path / "batched")["extra"]["batch"]
    states = report(tmp_path / "direct")["states"]
    assert resumed["submitted"] == 0 and resumed["resumed"] == 2 and resumed["answered"] == 2 * states
    assert rows(tmp_path / "batched") == rows(tmp_path / "direct")


def _stored_batches(cache: Path) -> int:
    if not cache.exists():
        return 0
    try:
        return sqlite3.connect(cache).execute("SELECT COUNT(*) FROM batches").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not there yet
        return 0


def test_batch_cannot_be_combined_with_early_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--source", str(tmp_path), "--teachers", "gpt-5", "--batch", "--early-stop"]) == 2
    assert "--batch" in capsys.readouterr().err


def test_a_create_whose_answer_was_lost_is_adopted_not_submitted_again(fixtures_root: Path,
                                                                      tmp_path: Path) -> None:
    session = next(fixtures_root.rglob(SESSION))
    with BatchServer(scripted, hold=False, lose_created=1) as server:
        pool = f"gpt-5=openai/gpt-5@{server.url}#price=gpt-5"
        assert main(args(session, tmp_path / "run", pool, "--batch", "--batch-poll", "0")) == 0
    assert server.created == 1 and server.direct == 0  # the retry found the batch the lost create made
    batch = report(tmp_path / "run")["extra"]["batch"]
    assert batch["submitted"] == 1 and batch["answered"] == report(tmp_path / "run")["states"]
