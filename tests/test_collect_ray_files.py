"""What a --ray task sends back and how the driver writes and reads it again, without Ray or docker: a
rollout's files (the mini agent's one, Claude Code's folder), the folder swapped in whole, a finished
rollout read back by a rerun; --seed and --samples at the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collect.claude_code import rollout_folder, token_turns
from collect.cluster import rollout_files
from collect.on_ray import resumed_outcome, write_rollout
from ingestion.rollout_format import FinalRecord, ProxyRecord, RolloutHeader, dump_record

ROOT = Path(__file__).resolve().parents[1]
ROW = {"instance_id": "a__b-1", "problem_statement": "x"}


def claude_folder(root: Path, sample: int, final: str | None = "submitted", tokens: int = 2) -> Path:
    """A Claude Code rollout folder as a run leaves it: header + final, proxy records, a session."""
    folder = root / rollout_folder("a__b-1", sample)
    (folder / "claude/projects/-testbed").mkdir(parents=True)
    header = RolloutHeader(rollout_id=f"a__b-1.run.s{sample}", run_id="run", instance_id="a__b-1",
                           sample=sample, image="img", student_model="m", student_url="u", max_turns=3,
                           agent_version=1, tools=[], created_at="t")
    records = [dump_record(header)]
    if final:
        records.append(dump_record(FinalRecord(exit_status=final, turns=3)))
    (folder / "rollout.jsonl").write_bytes(b"".join(records))
    exchanges = [ProxyRecord(id=str(n), message_id=f"msg_{n}", request_id=f"req_{n}", role="main", model="m",
                             backend_model="m", request={}, started_at="t",
                             completion_token_ids=[1, 2] if n < tokens else None) for n in range(3)]
    exchanges.append(ProxyRecord(id="e", message_id="msg_e", request_id="req_e", role="main", model="m",
                                 backend_model="m", request={}, started_at="t", status=502, error="down",
                                 completion_token_ids=[1]))
    exchanges.append(ProxyRecord(id="s", message_id="msg_s", request_id="req_s", role="side", model="m",
                                 backend_model="m", request={}, started_at="t", completion_token_ids=[1]))
    (folder / "proxy.jsonl").write_bytes(b"".join(dump_record(r) for r in exchanges) + b'{"half')
    (folder / "claude/projects/-testbed/s.jsonl").write_text('{"type": "user"}\n')
    return folder


def test_a_claude_code_folder_travels_whole_and_replaces_an_earlier_one(tmp_path: Path) -> None:
    scratch, out = tmp_path / "scratch", tmp_path / "out"
    folder = claude_folder(scratch, 1)
    (folder / "link").symlink_to("/etc/hostname")              # never read: nothing outside the folder
    files = rollout_files(scratch, "a__b-1.s1/rollout.jsonl")
    assert sorted(files) == ["a__b-1.s1/claude/projects/-testbed/s.jsonl", "a__b-1.s1/proxy.jsonl",
                             "a__b-1.s1/rollout.jsonl"]
    out.mkdir()
    (out / "a__b-1.s1").mkdir()
    (out / "a__b-1.s1/stale.txt").write_text("from an interrupted run")
    write_rollout(out, "a__b-1.s1/rollout.jsonl", files)
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == sorted(files)                              # the stale file went with the old folder
    assert sorted(p.name for p in out.iterdir()) == ["a__b-1.s1"]   # no .tmp, no .old left
    assert (out / "a__b-1.s1/proxy.jsonl").read_bytes() == (folder / "proxy.jsonl").read_bytes()


def test_the_mini_agents_file_is_written_alone(tmp_path: Path) -> None:
    (tmp_path / "a__b-1.rollout.jsonl").write_bytes(b"one\n")
    files = rollout_files(tmp_path, "a__b-1.rollout.jsonl")
    assert files == {"a__b-1.rollout.jsonl": b"one\n"} and rollout_files(tmp_path, None) == {}
    out = tmp_path / "out"
    out.mkdir()
    write_rollout(out, "a__b-1.rollout.jsonl", files)
    assert os.listdir(out) == ["a__b-1.rollout.jsonl"]


@pytest.mark.parametrize("name", ["../x", "other/rollout.jsonl", "a__b-1/../../x", "/abs/x"])
def test_a_file_outside_the_rollout_folder_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="not a file of the rollout folder"):
        write_rollout(tmp_path, "a__b-1/rollout.jsonl", {"a__b-1/rollout.jsonl": b"", name: b"x"})
    assert os.listdir(tmp_path) == [] and not (tmp_path.parent / "x").exists()   # nothing written at all


def test_a_rerun_reads_a_finished_claude_code_rollout_back(tmp_path: Path) -> None:
    claude_folder(tmp_path, 1)
    assert token_turns(tmp_path / "a__b-1.s1") == 2              # answered main requests with ids only
    outcome = resumed_outcome(tmp_path, ROW, evaluate=False, sample=1, claude=True)
    assert outcome is not None and outcome.resumed
    assert (outcome.rollout_file, outcome.sample, outcome.turns, outcome.turns_with_token_ids) == (
        "a__b-1.s1/rollout.jsonl", 1, 3, 2)
    assert resumed_outcome(tmp_path, ROW, evaluate=False, sample=0, claude=True) is None   # not there
    assert resumed_outcome(tmp_path, ROW, evaluate=True, sample=1, claude=True) is None    # not graded


@pytest.mark.parametrize("final", [None, "interrupted", "student_error"])
def test_an_unfinished_claude_code_rollout_runs_again(tmp_path: Path, final: str | None) -> None:
    claude_folder(tmp_path, 0, final=final)
    assert resumed_outcome(tmp_path, ROW, evaluate=False, sample=0, claude=True) is None


def run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    instances = tmp_path / "i.jsonl"
    instances.write_text(json.dumps(ROW) + "\n")
    argv = [sys.executable, "-m", "collect.run", "--instances", str(instances), "--student-url",
            "http://127.0.0.1:9/v1", "--student-model", "s", "--out", str(tmp_path / "out"), *extra]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_claude_code_samples_are_no_longer_refused(tmp_path: Path) -> None:
    done = run(tmp_path, "--agent", "claude-code", "--samples", "2", "--seed", "3")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "cannot reach the student at http://127.0.0.1:9/v1" in done.stderr   # the probe: past the flags


def test_a_seed_needs_a_vllm_student(tmp_path: Path) -> None:
    done = run(tmp_path, "--seed", "3", "--student-provider", "openai")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("collect.run: error: --seed: a vLLM student only")
