"""Never lose a dataset, never pay twice (#14): OUT swapped in whole, --force, signals, kill -9 and
resume, two runs on one cache. Runs are child processes (`python -m replay.run`), as a user starts
them, against a loopback server that records every request."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from datasets import load_from_disk

from replay.run import main
from tests.cli import Log, answered, pool, sigint_ignored, snapshot, spawn, stored_keys, tagged, wait_until
from tests.llm_server import LLMServer
from tests.teacher_script import scripted

SMALL = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"   # 4 states
MEDIUM = "fe869ecb-c176-478f-9734-7e4b8ef12cff"  # 34 states


def run_ok(*args: str) -> None:
    assert main(list(args)) == 0


def dataset_rows(out: Path) -> list[dict]:
    return load_from_disk(str(out / "dataset")).to_list()


@pytest.fixture
def session(fixtures_root: Path) -> Path:
    return next(fixtures_root.rglob(f"{SMALL}.jsonl"))


# --- 7. OUT: refused, forced, swapped ---------------------------------------------------------------

def test_foreign_folder_is_refused_unless_force_and_user_files_stay(
        session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "project"
    (out / "data").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    (out / "data" / "train.csv").write_text("a,b\n")
    mine = snapshot(out)
    assert main(["--source", str(session), "--out", str(out), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "replay.run did not make" in err and "--force" in err
    assert snapshot(out) == mine
    with LLMServer(scripted) as server:
        run_ok("--source", str(session), "--out", str(out), "--teachers", pool(server.url, "ta"), "--force")
        run_ok("--source", str(session), "--out", str(out), "--teachers", pool(server.url, "ta"))  # now ours
    after = snapshot(out)
    assert {k: after[k] for k in mine} == mine
    assert (out / "dataset").is_dir() and (out / "README.md").is_file()
    assert not [p for p in out.iterdir() if p.name.startswith(".replay-")]


def test_force_never_replaces_a_user_file_of_the_same_name(session: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "project"
    (out / "dataset").mkdir(parents=True)
    (out / "dataset" / "keep.txt").write_text("mine")
    (out / "README.md").write_text("# my project")
    mine = snapshot(out)
    assert main(["--source", str(session), "--out", str(out), "--dry-run", "--force"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dataset, README.md would be replaced" in err
    assert snapshot(out) == mine


def test_a_run_replaces_the_previous_runs_files_and_keeps_the_rest(session: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with LLMServer(scripted) as server:
        run_ok("--source", str(session), "--out", str(out), "--teachers", pool(server.url, "ta", "tb"))
        (out / "ablation").mkdir()  # replay.ablate's, not the run's
        (out / "ablation" / "ablation.csv").write_text("pool\n")
        first = snapshot(out)
        run_ok("--source", str(session), "--out", str(out), "--teachers", pool(server.url, "tc"))
    second = snapshot(out)
    assert second["ablation/ablation.csv"] == first["ablation/ablation.csv"]
    assert second["run.json"] != first["run.json"] and second["proposals.jsonl"] != first["proposals.jsonl"]
    assert json.loads((out / "report.json").read_text())["extra"]["per_teacher"].keys() == {"tc"}
    assert not [p for p in out.iterdir() if p.name.startswith(".replay-")]


# --- 8. SIGINT / SIGTERM ----------------------------------------------------------------------------

@pytest.mark.parametrize(("signum", "code", "name"), [(signal.SIGINT, 130, "SIGINT"),
                                                      (signal.SIGTERM, 143, "SIGTERM")])
def test_signal_is_one_line_keeps_answers_and_out(fixtures_root: Path, tmp_path: Path, signum: int,
                                                  code: int, name: str) -> None:
    session = next(fixtures_root.rglob(f"{MEDIUM}.jsonl"))
    out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
    log = Log(tagged, delay=0.1)
    with LLMServer(log) as server:
        teachers = pool(server.url, "ta", "tb")
        run_ok("--source", str(session), "--out", str(out), "--teachers", teachers, "--max-states", "3",
               "--cache", str(tmp_path / "first.sqlite"))
        before = snapshot(out)
        args = ("--source", str(session), "--out", str(out), "--teachers", teachers, "--cache", str(cache),
                "--concurrency", "4")
        # SIGINT: started with SIGINT ignored, as a script's background job is (CI ran it so, and the
        # run ignored the signal and exited 0 until replay.signals installed the handler itself).
        victim = spawn(*args, ignoring_sigint=signum == signal.SIGINT)
        wait_until(lambda: len(stored_keys(cache)) >= 8 or victim.poll() is not None, "8 answers stored")
        victim.send_signal(signum)
        _, err = victim.communicate(timeout=120)
        kept = answered(cache)
        log.clear()
        resumed = spawn(*args)
        assert resumed.wait(timeout=600) == 0, resumed.stderr.read() if resumed.stderr else ""
    text = err.decode()
    assert victim.returncode == code, text
    assert text.count("\n") == 1 and text.startswith(f"interrupted ({name})") and "Traceback" not in text
    assert snapshot(out) != before  # the resumed run finished ...
    assert kept and not kept & set(log.keys())  # ... asking nothing the interrupted one had stored
    assert len(log.keys()) == 2 * 34 - len(kept)


def test_a_sigterm_while_the_event_loop_runs_a_callback_stops_the_run() -> None:
    """asyncio logs and drops what a callback of its loop raises, but KeyboardInterrupt and SystemExit:
    a SIGTERM landing in one (its self-pipe's reader, when the signal wakes it) must still stop the run.
    CI saw a run go on to the end and exit 0 after "Exception in callback ... Interrupted"."""
    import asyncio

    from replay.signals import Interrupted, stop_signals

    def busy_callback() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(10_000))   # Python's own code: the handler runs here, inside the callback

    async def run() -> None:
        asyncio.get_running_loop().call_soon(busy_callback)
        await asyncio.sleep(5)

    with stop_signals(), pytest.raises(Interrupted):
        asyncio.run(run())


def test_sigint_inherited_ignored_still_interrupts_and_is_ignored_again_after() -> None:
    """A script's background job inherits SIGINT ignored; the run must stop on it all the same (asyncio.run
    cancels its main task only where Python's own handler is installed), and leave the handler as it was."""
    import asyncio

    from replay.signals import stop_signals

    async def run() -> None:
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
        await asyncio.sleep(30)

    with sigint_ignored():
        with stop_signals(), pytest.raises(KeyboardInterrupt):
            asyncio.run(run())
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_interrupted_run_leaves_out_as_it_was(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob(f"{MEDIUM}.jsonl"))
    out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
    with LLMServer(Log(tagged, delay=0.1)) as server:
        teachers = pool(server.url, "ta")
        run_ok("--source", str(session), "--out", str(out), "--teachers", teachers, "--max-states", "2")
        before = snapshot(out)
        victim = spawn("--source", str(session), "--out", str(out), "--teachers", teachers, "--cache",
                       str(cache))
        wait_until(lambda: len(stored_keys(cache)) >= 4 or victim.poll() is not None, "4 answers stored")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        assert snapshot(out) == before
        assert [p for p in out.iterdir() if p.name.startswith(".replay-run-")]  # its hidden, half-written run
        run_ok("--source", str(session), "--out", str(out), "--teachers", teachers, "--max-states", "2")
    assert not [p for p in out.iterdir() if p.name.startswith(".replay-")]  # removed by the next run


# --- 5. one cache, two runs at once -----------------------------------------------------------------

def test_two_concurrent_runs_on_one_cache_pay_once(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob(f"{MEDIUM}.jsonl"))
    cache = tmp_path / "cache.sqlite"
    log = Log(tagged, delay=0.05)
    with LLMServer(log) as server:
        teachers = pool(server.url, "ta", "tb")
        runs = [spawn("--source", str(session), "--out", str(tmp_path / name), "--cache", str(cache),
                      "--teachers", teachers, "--concurrency", "4") for name in ("a", "b")]
        for run in runs:
            assert run.wait(timeout=600) == 0, run.stderr.read() if run.stderr else ""
    keys = log.keys()
    assert len(keys) == len(set(keys)) == 2 * 34  # one run's requests, in all
    reports = [json.loads((tmp_path / name / "report.json").read_text()) for name in ("a", "b")]
    assert sum(r["teacher_calls"]["made"] for r in reports) == 2 * 34
    assert sum(r["teacher_calls"]["cached"] for r in reports) == 2 * 34
    assert dataset_rows(tmp_path / "a") == dataset_rows(tmp_path / "b")
