"""Unreachable teachers found in seconds (#28): a start-up probe per endpoint and a circuit breaker.
Counts of calls and retries, never times (bench/unreachable.py times it)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from replay.run import main
from teachers import ResponseCache, RetryPolicy, TeacherPool, TeacherSpec
from tests.cli import pool, snapshot
from tests.llm_server import LLMServer
from tests.teacher_script import scripted
from tests.test_ratelimit import states

SMALL = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"  # 4 states


@pytest.fixture
def refused() -> str:
    """A loopback address nothing listens on: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


def test_all_teachers_unreachable_is_one_line_exit_1_out_untouched(fixtures_root: Path, tmp_path: Path,
                                                                   refused: str, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("previous output")
    before = snapshot(out)
    code, err = cli(capsys, "--source", str(fixtures_root), "--out", str(out), "--force",
                    "--cache", str(tmp_path / "c.sqlite"), "--teachers", pool(refused, "ta", "tb"))
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "ta (" in lines[0] and "tb (" in lines[0] and "reached" in lines[0], err
    assert snapshot(out) == before


def test_one_unreachable_teacher_fails_its_calls_without_one_attempt(fixtures_root: Path, tmp_path: Path,
                                                                     refused: str, capsys) -> None:
    session = next(fixtures_root.rglob(f"{SMALL}.jsonl"))
    out = tmp_path / "out"
    with LLMServer(scripted) as server:
        teachers = f"{pool(server.url, 'ta')},down=openai/down@{refused}"
        code, err = cli(capsys, "--source", str(session), "--out", str(out), "--max-failed", "1",
                        "--cache", str(tmp_path / "c.sqlite"), "--teachers", teachers)
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    down = report["extra"]["per_teacher"]["down"]
    assert down["failed"] == down["unreachable"] == report["states"] and down["retries"] == 0
    assert report["extra"]["failure_kinds"] == {"unreachable": report["states"]}
    assert len(server.requests) == report["states"]  # ta alone was asked
    assert "down cannot be reached" in err


def test_breaker_stops_a_teacher_whose_endpoint_goes_away(tmp_path: Path, refused: str) -> None:
    """Past the probe (none here), 60 states against a refused port: once 5 connection errors in a row
    trip the breaker, the rest fail at once; attempts stay a handful, not 60 x 5."""
    spec = TeacherSpec(name="gone", model="openai/m", family="qwen", api_base=refused, api_key="k")
    teacher_pool = TeacherPool([spec], cache=ResponseCache(tmp_path / "c.sqlite"), concurrency=16,
                               per_teacher=8, retry=RetryPolicy(attempts=5, base_wait=0.05, max_wait=0.2))

    async def go() -> list:
        return await asyncio.gather(*(teacher_pool.propose(s) for s in states(60, 10)))

    answers = [p for ps in asyncio.run(go()) for p in ps]
    counts = teacher_pool.stats.to_report()["per_teacher"]["gone"]
    assert counts["failed"] == 60 and counts["made"] == 0
    assert counts["unreachable"] >= 50
    assert all(p.error.split(":")[0] in ("unreachable", "connection") for p in answers)
    attempts = counts["retries"] + sum(p.error.startswith("connection") for p in answers)
    assert attempts <= 5 + 8 * 2, counts  # the trip, plus what was in flight or backing off then
