"""`--agent claude-code` without docker or the CLI: flags, the binary's resolution and fetch, copying a
session out, and ingestion joining a session to its proxy records (rollout folders built here)."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from collect.claude_code import ClaudeCodeAgent, ClaudeCodeOptions, ClaudeRolloutHeader
from collect.claude_code_cli import (
    BINARY_ENV,
    CACHE_ENV,
    fetch_binary,
    find_binary,
    integrity_of,
    load_claude_code_spec,
)
from collect.claude_code_session import extract_work
from collect.config import CollectConfig, CollectError
from ingestion.options import IngestOptions
from ingestion.rollout_format import FinalRecord, ProxyRecord
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from ingestion.store import load_states

ROOT = Path(__file__).resolve().parents[1]
SPEC = load_claude_code_spec()


# --- the flags and the binary -------------------------------------------------------------------------

def test_a_missing_binary_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    instances = tmp_path / "i.jsonl"
    instances.write_text('{"instance_id": "a__b-1", "problem_statement": "x"}\n')
    done = subprocess.run([sys.executable, "-m", "collect.run", "--agent", "claude-code", "--instances",
                           str(instances), "--student-url", "http://127.0.0.1:9/v1", "--student-model", "s",
                           "--out", str(tmp_path / "out"), "--claude-binary", str(tmp_path / "nope")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("collect.run: error: --claude-binary ")
    assert "no such file; pass --claude-binary PATH" in done.stderr
    assert "python -m collect.claude_code_cli fetch" in done.stderr
    assert not (tmp_path / "out").exists()


def test_the_binary_comes_from_the_flag_the_environment_then_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(BINARY_ENV, raising=False)
    assert find_binary(None, SPEC) is None                 # then the image's own `claude` is used
    cached = tmp_path / "cache" / SPEC.cli.version / "claude"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"cached")
    assert find_binary(None, SPEC) == cached
    (tmp_path / "env-claude").write_bytes(b"env")
    monkeypatch.setenv(BINARY_ENV, str(tmp_path / "env-claude"))
    assert find_binary(None, SPEC) == tmp_path / "env-claude"
    (tmp_path / "flag-claude").write_bytes(b"flag")
    assert find_binary(tmp_path / "flag-claude", SPEC) == tmp_path / "flag-claude"
    monkeypatch.setenv(BINARY_ENV, str(tmp_path / "gone"))
    with pytest.raises(CollectError, match=f"{BINARY_ENV} .*gone: no such file"):
        find_binary(None, SPEC)


def fake_npm(tmp_path: Path, payload: bytes) -> Path:
    """An `npm` whose `pack` writes a tarball holding package/claude (no registry involved)."""
    tarball = tmp_path / "made.tgz"
    with tarfile.open(tarball, "w:gz") as tar:
        info = tarfile.TarInfo("package/claude")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    script = tmp_path / "npm"
    script.write_text(f'#!/bin/sh\nwhile [ "$1" != --pack-destination ]; do shift; done\n'
                      f'cp {tarball} "$2/pkg.tgz"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_fetch_checks_the_integrity_and_unpacks_the_binary(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    npm = fake_npm(tmp_path, b"\x7fELF binary")
    with pytest.raises(CollectError, match="integrity does not match"):
        fetch_binary(SPEC, npm=str(npm))
    pinned = SPEC.model_copy(update={"cli": SPEC.cli.model_copy(
        update={"integrity": integrity_of(tmp_path / "made.tgz")})})
    path = fetch_binary(pinned, npm=str(npm))
    assert path == tmp_path / "cache" / SPEC.cli.version / "claude"
    assert path.read_bytes() == b"\x7fELF binary" and os.access(path, os.X_OK)
    assert list(path.parent.iterdir()) == [path]            # the tarball's work folder is gone
    with pytest.raises(CollectError, match="npm is not installed"):
        fetch_binary(SPEC.model_copy(update={"cli": SPEC.cli.model_copy(update={"version": "0.0.0"})}),
                     npm=str(tmp_path / "no-npm"))


def test_the_session_folder_is_copied_out_without_its_top_folder(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (("teacher-replay/result.json", b"{}"),
                           ("teacher-replay/claude/projects/-testbed/s.jsonl", b"{}\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("teacher-replay/escape")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    data = buffer.getvalue()
    with pytest.raises(tarfile.TarError):                   # "data" filter: no link out of the folder
        extract_work([data[:4096], data[4096:]], tmp_path / "out")
    assert (tmp_path / "out/result.json").read_bytes() == b"{}"
    assert (tmp_path / "out/claude/projects/-testbed/s.jsonl").is_file()


def test_a_rollout_folder_is_cleared_of_an_earlier_run(tmp_path: Path) -> None:
    binary = tmp_path / "claude"
    binary.write_bytes(b"x")
    config = CollectConfig(instances=tmp_path / "i.jsonl", student_url="http://h/v1", student_model="s",
                           out=tmp_path / "out")
    agent = ClaudeCodeAgent(ClaudeCodeOptions(binary=binary, small_backend="small"), config, None, "run-1")
    old = tmp_path / "out/a__b-1/claude/projects/-testbed/old.jsonl"
    old.parent.mkdir(parents=True)
    old.write_text("{}\n")
    (tmp_path / "out/a__b-1/proxy.jsonl").write_text("{}\n")
    assert agent.rollout_path("a__b-1") == tmp_path / "out/a__b-1/rollout.jsonl"
    assert list((tmp_path / "out/a__b-1").iterdir()) == []
    assert agent.models == {"claude-sonnet-4-6": "s", "claude-haiku-4-5": "small"}


# --- ingestion: the session joined to the proxy records ------------------------------------------------

def envelope(uuid: str, parent: str | None) -> dict[str, Any]:
    return {"uuid": uuid, "parentUuid": parent, "isSidechain": False, "sessionId": "sess-1",
            "cwd": "/testbed", "version": SPEC.cli.version, "gitBranch": "HEAD",
            "timestamp": "2026-01-01T00:00:00Z"}


def turn(uuid: str, parent: str, record_id: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {**envelope(uuid, parent), "type": "assistant", "requestId": f"req_{record_id}",
            "message": {"id": f"msg_{record_id}", "type": "message", "role": "assistant",
                        "model": "claude-sonnet-4-6", "content": blocks}}


def user(uuid: str, parent: str | None, content: Any) -> dict[str, Any]:
    return {**envelope(uuid, parent), "type": "user", "message": {"role": "user", "content": content}}


def record(record_id: str, role: str, tokens: list[int], calls: list[dict[str, Any]] | None = None,
           content: str = "") -> ProxyRecord:
    response: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        response["tool_calls"] = calls
    return ProxyRecord(id=record_id, message_id=f"msg_{record_id}", request_id=f"req_{record_id}", role=role,
                       model="claude-sonnet-4-6", backend_model="Qwen/Student", started_at="t",
                       request={"messages": []}, response=response, prompt_token_ids=[1, 2, 3],
                       completion_token_ids=tokens, logprobs=[-0.5] * len(tokens))


def write_rollout(folder: Path, final: bool = True) -> None:
    """A rollout as collect.run --agent claude-code leaves it: turns r1, r2 (student), r3 (a side request
    that somehow became a turn) and r4 (no record)."""
    edit = {"file_path": "/testbed/calc.py", "old_string": "a - b", "new_string": "a + b"}
    session = [
        user("u1", None, "Solve the issue."),
        turn("a1", "u1", "r1", [{"type": "tool_use", "id": "call_0", "name": "Edit",
                                 "input": {**edit, "replace_all": False}}]),   # the CLI's default added
        user("u2", "a1", [{"type": "tool_result", "tool_use_id": "call_0", "content": "edited"}]),
        turn("a2", "u2", "r2", [{"type": "text", "text": "Fixed."}]),
        user("u3", "a2", "and a title?"),
        turn("a3", "u3", "r3", [{"type": "text", "text": "Toy title"}]),
        user("u4", "a3", "thanks"),
        turn("a4", "u4", "r4", [{"type": "text", "text": "You're welcome."}]),
    ]
    path = folder / "claude/projects/-testbed/sess-1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in session))
    records = [record("r1", "main", [10, 11], [{"id": "call_0", "type": "function", "function": {
                   "name": "Edit", "arguments": json.dumps(edit)}}]),
               record("r2", "main", [20, 21, 22], content="Fixed."),
               record("r3", "side", [30], content="Toy title")]
    half_written = '{"type": "exch'
    (folder / "proxy.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records) + half_written)
    header = ClaudeRolloutHeader(rollout_id="toy__calc-1.run-1", run_id="run-1", instance_id="toy__calc-1",
                                 repo="toy/calc", image="img", student_model="Qwen/Student", student_url="u",
                                 max_turns=10, agent_version=1, tools=[], created_at="t",
                                 cli_version=SPEC.cli.version, cli_source="image", models={})
    lines = [header.model_dump_json()]
    if final:
        done = FinalRecord(exit_status="submitted", turns=2, reward=1.0, resolved=True)
        lines.append(done.model_dump_json())
    (folder / "rollout.jsonl").write_text("\n".join(lines) + "\n")


def test_each_turn_gets_the_tokens_of_the_request_that_produced_it(tmp_path: Path) -> None:
    write_rollout(tmp_path / "out/toy__calc-1")
    stats = IngestStats()
    states = list(iter_states(tmp_path / "out", IngestOptions(), stats))
    assert [(s.turn, s.metadata["message_id"]) for s in states] == [
        (0, "msg_r1"), (1, "msg_r2"), (3, "msg_r4")]
    first, second, unmatched = states
    assert first.state_id == "swebench_rollout:toy__calc-1.run-1:0" and first.source == "swebench_rollout"
    assert (first.trace_id, first.student_model) == ("toy__calc-1.run-1", "Qwen/Student")
    assert first.metadata["completion_token_ids"] == [10, 11] and first.metadata["logprobs"] == [-0.5, -0.5]
    assert first.metadata["prompt_token_ids"] == [1, 2, 3] and first.metadata["proxy_record"] == "r1"
    assert (first.metadata["reward"], first.metadata["instance_id"], first.metadata["agent"]) == (
        1.0, "toy__calc-1", "claude-code")
    assert first.metadata["session_id"] == "sess-1" and first.metadata["cwd"] == "/testbed"
    assert "replace_all" not in first.student_action.tool_calls[0].arguments   # what the student generated
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "call_0", "name": "Edit",
                                   "content": "edited"}
    assert second.student_action.content == "Fixed."
    assert second.metadata["completion_token_ids"] == [20, 21, 22]
    assert unmatched.metadata["completion_token_ids"] is None and unmatched.metadata["reward"] == 1.0
    assert stats.skipped_turns["side_request"] == 1 and stats.states == 3 and stats.traces == 1
    assert stats.repaired_lines["no_proxy_record"] == 1 and stats.skipped_lines["invalid_proxy_record"] == 1
    assert stats.files == 3 and not stats.skipped_files     # proxy.jsonl and rollout.jsonl give nothing


def test_replay_dry_run_reads_a_rollout_folder(tmp_path: Path) -> None:
    from replay.run import main as replay_main

    write_rollout(tmp_path / "out/toy__calc-1", final=False)
    args = ["--source", str(tmp_path / "out"), "--out", str(tmp_path / "states"), "--dry-run"]
    assert replay_main(args) == 0
    states = [s.model_dump(mode="json") for s in load_states(tmp_path / "states")]
    assert [(s["turn"], s["metadata"]["completion_token_ids"]) for s in states] == [
        (0, [10, 11]), (1, [20, 21, 22]), (3, None)]
    assert {s["metadata"]["reward"] for s in states} == {None}          # no final record: reward unknown
    report = json.loads((tmp_path / "states/report.json").read_text())
    assert report["states"] == 3
