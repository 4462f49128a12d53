"""`collect.run --agent claude-code` end to end: real docker, the real Claude Code binary, no GPU.

`pytest -m docker` (after `.ci/docker.sh`). The toy instance of tests/collect_toy.py, once more with the
CLI baked into a derived image; a loopback OpenAI server scripts the student Claude Code talks to
through the recording proxy (and answers vLLM-style, with token ids and logprobs); the swebench harness
grades. Without the CLI (no cache, no npm registry) every test here is skipped, saying why.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from collect.claude_code_cli import cached_binary, fetch_binary, load_claude_code_spec
from collect.config import CollectError
from collect.instances import image_name
from collect.runtime import LABEL, containers
from ingestion.store import load_states
from tests.collect_toy import (
    IMAGE_TAG,
    NAMESPACE,
    ensure_instance_images,
    toy_instance,
    toy_policy,
    vllm_body,
)
from tests.llm_server import Reply, chat_completion
from tests.vllm_server import EOS, VLLMConfig, VLLMServer, assistant_text

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[1]
IDS = ["toy__calc-1", "toy__calc-2"]

SLOW = "python3 -c 'import time; time.sleep(300)'"
CHECK = "pwd && python3 -c 'from calc import add; print(add(2, 3))'"
CLAUDE_SCRIPTS: dict[str, list[Any]] = {
    "fix": [
        [{"name": "Read", "arguments": {"file_path": "/testbed/calc.py"}}],
        [{"name": "Edit", "arguments": {"file_path": "/testbed/calc.py",
                                        "old_string": "def add(a, b):\n    return a - b",
                                        "new_string": "def add(a, b):\n    return a + b"}}],
        [{"name": "Bash", "arguments": {"command": CHECK, "description": "Check add"}}],
        "add() subtracted; it adds now.",
    ],
    "nofix": [
        [{"name": "Bash", "arguments": {"command": "pwd && ls", "description": "List the repo"}}],
        [{"name": "Write", "arguments": {"file_path": "/testbed/NOTES.md", "content": "add is fine\n"}}],
        "Nothing to fix.",
    ],
    # the CLI blocks a plain `sleep 300`; a long-running program it lets through
    "sleepy": [[{"name": "Bash", "arguments": {"command": SLOW, "description": "Wait"}}], "done"],
}


def student_server() -> VLLMServer:
    """A vLLM-shaped server (GET /models for the start-up probe) whose answers are claude_student's."""
    return VLLMServer(toy_policy(), intercept=claude_student)


def claude_student(request: dict[str, Any]) -> Reply:
    """The student behind the proxy: side requests (no tools) get a title, turns follow the script."""
    if not request.get("tools"):
        return Reply(chat_completion("Toy session", model="student"))
    messages = request.get("messages") or []
    text = json.dumps(messages)
    name = next((key for key in CLAUDE_SCRIPTS if f"[script: {key}]" in text), "nofix")
    turn = sum(message.get("role") == "assistant" for message in messages)
    script = CLAUDE_SCRIPTS[name]
    step = script[turn] if turn < len(script) else "done"
    return Reply(vllm_body(step, turn, with_tokens=bool(request.get("return_token_ids"))))


@pytest.fixture(scope="session")
def cli() -> Path:
    """The pinned CLI from the cache, fetched with npm when missing; skip when it cannot be had."""
    spec = load_claude_code_spec()
    try:
        return fetch_binary(spec)
    except (CollectError, OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"the Claude Code CLI is not available ({exc}); it would be at {cached_binary(spec)}")


@pytest.fixture(scope="session")
def plain_tag(client: Any) -> str:
    return ensure_instance_images(client, IDS)


@pytest.fixture(scope="session")
def baked_tag(client: Any, cli: Path, plain_tag: str) -> str:
    """The toy instance images with the CLI baked in at /usr/local/bin/claude (built once, cached)."""
    version = load_claude_code_spec().cli.version
    tag = f"cc-{hashlib.sha256(f'{IMAGE_TAG}:{version}'.encode()).hexdigest()[:10]}"
    first = image_name(IDS[0], NAMESPACE, tag)
    try:
        client.images.get(first)
    except Exception:
        with tempfile.TemporaryDirectory() as context:
            shutil.copy2(cli, Path(context, "claude"))
            Path(context, "Dockerfile").write_text(
                f"FROM {image_name(IDS[0], NAMESPACE, plain_tag)}\nCOPY claude /usr/local/bin/claude\n")
            client.images.build(path=context, tag=first, network_mode="none", rm=True, forcerm=True)
    image = client.images.get(first)
    for instance_id in IDS[1:]:
        repository, name = image_name(instance_id, NAMESPACE, tag).rsplit(":", 1)
        image.tag(repository, name)
    return tag


def leftovers(client: Any) -> list[str]:
    ours = [c.name for c in containers(client, {"label": LABEL})]
    networks = [n.name for n in client.networks.list(filters={"label": LABEL})]
    return ours + networks


def command(tmp_path: Path, rows: list[Any], url: str, tag: str, *extra: str) -> list[str]:
    instances = tmp_path / "instances.jsonl"
    instances.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return [sys.executable, "-m", "collect.run", "--agent", "claude-code", "--instances", str(instances),
            "--student-url", url, "--student-model", "student", "--out", str(tmp_path / "out"),
            "--namespace", NAMESPACE, "--image-tag", tag, "--max-turns", "10", *extra]


def collect(tmp_path: Path, rows: list[Any], url: str, tag: str, *extra: str,
            env: dict[str, str] | None = None) -> tuple[int, dict | None, str]:
    done = subprocess.run(command(tmp_path, rows, url, tag, *extra), cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})
    report = tmp_path / "out/report.json"
    return done.returncode, json.loads(report.read_text()) if report.exists() else None, done.stderr


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def session_file(folder: Path) -> Path:
    sessions = sorted((folder / "claude/projects").rglob("*.jsonl"))
    assert len(sessions) == 1, sessions
    return sessions[0]


def test_claude_code_fixes_the_toy_instance_and_is_graded(tmp_path: Path, client: Any,
                                                          baked_tag: str) -> None:
    rows = [toy_instance("toy__calc-1", "fix"), toy_instance("toy__calc-2", "nofix")]
    # no binary on the host: the runs must use the `claude` baked into the image
    env = {"REPLAY_CLAUDE_CODE_CACHE": str(tmp_path / "no-cache")}
    with student_server() as server:
        code, report, stderr = collect(tmp_path, rows, server.url, baked_tag, "--workers", "2", "--evaluate",
                                       env=env)
    assert code == 0, stderr
    outcomes = {o["instance_id"]: o for o in report["outcomes"]}
    assert (outcomes["toy__calc-1"]["reward"], outcomes["toy__calc-2"]["reward"]) == (1.0, 0.0), outcomes
    assert outcomes["toy__calc-1"]["rollout_file"] == "toy__calc-1/rollout.jsonl"
    assert (outcomes["toy__calc-1"]["turns"], outcomes["toy__calc-1"]["turns_with_token_ids"]) == (4, 4)

    fixed = tmp_path / "out/toy__calc-1"
    header, final = lines(fixed / "rollout.jsonl")
    assert (header["agent"], header["cli_source"], header["cli_version"]) == (
        "claude-code", "image", load_claude_code_spec().cli.version)
    assert final["exit_status"] == "submitted" and final["resolved"] is True
    assert "-    return a - b\n+    return a + b" in final["patch"]
    assert json.loads((fixed / "result.json").read_text())["num_turns"] == 4

    # Claude Code ran the student's tool calls, in /testbed
    session = lines(session_file(fixed))
    assert {r["cwd"] for r in session if r.get("type") in ("user", "assistant")} == {"/testbed"}
    results = [block for r in session if r.get("type") == "user" and isinstance(r["message"]["content"], list)
               for block in r["message"]["content"] if block.get("type") == "tool_result"]
    outputs = [str(block["content"]) for block in results]
    assert "return a - b" in outputs[0]                         # Read
    assert "/testbed\n5" in outputs[2]                          # Bash: pwd, then the fixed add(2, 3)

    records = lines(fixed / "proxy.jsonl")
    main = [r for r in records if r["role"] == "main"]
    assert len(main) == 4 and all(r["completion_token_ids"] and r["status"] == 200 for r in main)
    assert {r["stream"] for r in main} == {True}                # the CLI streams; the proxy answered SSE
    assert all(r["request"]["tools"] for r in main)

    # replay.run --dry-run on the run's folder: one state per student turn, tokens attached
    done = subprocess.run([sys.executable, "-m", "replay.run", "--source", str(tmp_path / "out"), "--dry-run",
                           "--out", str(tmp_path / "states")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    states = [s.model_dump(mode="json") for s in load_states(tmp_path / "states")]
    turns = [(s["metadata"]["instance_id"], s["turn"]) for s in states]
    assert sorted(turns) == [("toy__calc-1", 0), ("toy__calc-1", 1), ("toy__calc-1", 2), ("toy__calc-1", 3),
                             ("toy__calc-2", 0), ("toy__calc-2", 1), ("toy__calc-2", 2)]
    by_message = {r["message_id"]: r for r in main}
    for state in states:
        meta = state["metadata"]
        assert state["source"] == "swebench_rollout" and state["student_model"] == "student"
        assert meta["completion_token_ids"] and meta["prompt_token_ids"]
        assert len(meta["logprobs"]) == len(meta["completion_token_ids"])
        assert meta["reward"] == {"toy__calc-1": 1.0, "toy__calc-2": 0.0}[meta["instance_id"]]
        if meta["instance_id"] == "toy__calc-1":
            assert meta["completion_token_ids"] == by_message[meta["message_id"]]["completion_token_ids"]
    first = next(s for s in states if s["metadata"]["instance_id"] == "toy__calc-1" and s["turn"] == 1)
    assert first["student_action"]["tool_calls"][0] == {      # as generated: no `replace_all` added
        "id": "call_1_0", "name": "Edit", "arguments": CLAUDE_SCRIPTS["fix"][1][0]["arguments"]}
    assert first["metadata"]["completion_token_ids"] == [1010, 1011, 1012, 1013]   # vllm_body, turn 1
    assert leftovers(client) == []


def claude_policy(request: dict[str, Any]) -> str:
    """claude_student as the model behind a vLLM-shaped server: the raw text it writes, thinking first."""
    if not request.get("tools"):
        return "Toy session"
    messages = request.get("messages") or []
    text = json.dumps(messages)
    if "connectivity check" in text:
        return assistant_text("", [{"name": "bash", "arguments": {"command": "echo ready"}}])
    name = next((key for key in CLAUDE_SCRIPTS if f"[script: {key}]" in text), "nofix")
    turn = sum(message.get("role") == "assistant" for message in messages)
    step = CLAUDE_SCRIPTS[name][turn] if turn < len(CLAUDE_SCRIPTS[name]) else "done"
    if isinstance(step, str):
        return assistant_text(step, reasoning=f"Turn {turn}.")
    return assistant_text("", step, reasoning=f"Turn {turn}.")


@pytest.mark.parametrize("version", ["0.33", "0.10"])
def test_each_prompt_extends_the_last_through_claude_code(tmp_path: Path, client: Any, cli: Path,
                                                         plain_tag: str, version: str) -> None:
    """The student's thinking reaches the CLI and comes back the way the server's template reads it, and
    its tool calls come back as generated (the CLI adds Edit's `replace_all: false`; the proxy restores)."""
    with VLLMServer(claude_policy, VLLMConfig(version=version, max_model_len=1_000_000)) as server:
        code, report, stderr = collect(tmp_path, [toy_instance("toy__calc-1", "fix")], server.url, plain_tag,
                                       "--claude-binary", str(cli), "--evaluate")
    assert code == 0, stderr
    [outcome] = report["outcomes"]
    assert (outcome["exit_status"], outcome["reward"]) == ("submitted", 1.0)
    assert outcome["turns_with_token_ids"] == 4
    main = [r for r in lines(tmp_path / "out/toy__calc-1/proxy.jsonl") if r["role"] == "main"]
    assert [r["reasoning"] for r in main] == [f"\nTurn {n}.\n" for n in range(4)]
    for before, after in zip(main, main[1:], strict=False):
        prefix = before["prompt_token_ids"] + before["completion_token_ids"]
        assert after["prompt_token_ids"][:len(prefix)] == prefix
    assert all(r["completion_token_ids"][-1] == EOS for r in main)
    assert all(len(r["logprobs"]) == len(r["completion_token_ids"]) for r in main)
    session = lines(session_file(tmp_path / "out/toy__calc-1"))
    thinking = [block for r in session if r.get("type") == "assistant"
                for block in r["message"]["content"] if block.get("type") == "thinking"]
    assert [block["thinking"] for block in thinking] == [f"\nTurn {n}.\n" for n in range(4)]
    assert leftovers(client) == []


def test_a_binary_from_the_host_is_copied_in_and_max_turns_ends_it(tmp_path: Path, client: Any, cli: Path,
                                                                     plain_tag: str) -> None:
    with student_server() as server:
        code, report, stderr = collect(tmp_path, [toy_instance("toy__calc-1", "fix")], server.url, plain_tag,
                                       "--claude-binary", str(cli), "--max-turns", "2")
    assert code == 0, stderr
    header, final = lines(tmp_path / "out/toy__calc-1/rollout.jsonl")
    assert header["cli_source"] == "copied"
    assert (final["exit_status"], final["turns"], final["reward"]) == ("max_turns", 2, None)
    assert "+    return a + b" in final["patch"]                # Read, then Edit: the fix made it
    assert json.loads((tmp_path / "out/toy__calc-1/result.json").read_text())["subtype"] == "error_max_turns"
    assert leftovers(client) == []


def test_a_session_past_its_timeout_is_killed_and_kept(tmp_path: Path, client: Any, cli: Path,
                                                       plain_tag: str) -> None:
    with student_server() as server:
        code, report, stderr = collect(tmp_path, [toy_instance("toy__calc-1", "sleepy")], server.url,
                                       plain_tag, "--claude-binary", str(cli), "--claude-timeout", "10")
    assert code == 0, stderr
    final = lines(tmp_path / "out/toy__calc-1/rollout.jsonl")[-1]
    assert (final["exit_status"], final["turns"], final["patch"]) == ("max_turns", 1, "")
    assert lines(session_file(tmp_path / "out/toy__calc-1"))   # the session so far was copied out
    assert leftovers(client) == []


def test_sigint_removes_every_container_and_the_network(tmp_path: Path, client: Any, cli: Path,
                                                        plain_tag: str) -> None:
    rows = [toy_instance("toy__calc-1", "sleepy"), toy_instance("toy__calc-2", "sleepy")]
    with student_server() as server:
        process = subprocess.Popen(command(tmp_path, rows, server.url, plain_tag, "--claude-binary", str(cli),
                                           "--workers", "2"),
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)                                     # both sessions are inside SLOW now
        assert len(leftovers(client)) == 3                  # two containers and the proxy's network
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert leftovers(client) == []
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["interrupted"] is True and report["errors"] == {"interrupted": 2}
    final = lines(tmp_path / "out/toy__calc-1/rollout.jsonl")[-1]
    assert (final["type"], final["exit_status"]) == ("final", "interrupted")


def test_no_cli_anywhere_is_one_line_naming_the_flag(tmp_path: Path, client: Any, plain_tag: str) -> None:
    env = {"REPLAY_CLAUDE_CODE_CACHE": str(tmp_path / "no-cache")}
    with student_server() as server:
        code, report, stderr = collect(tmp_path, [toy_instance("toy__calc-1", "fix")], server.url, plain_tag,
                                       env=env)
    assert code == 2 and report is None
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "no Claude Code CLI" in stderr and "--claude-binary PATH" in stderr
    assert leftovers(client) == []


def test_an_unreachable_student_stops_the_run_in_one_line(tmp_path: Path, client: Any, cli: Path,
                                                          plain_tag: str) -> None:
    code, report, stderr = collect(tmp_path, [toy_instance("toy__calc-1", "fix")], "http://127.0.0.1:9/v1",
                                   plain_tag, "--claude-binary", str(cli), "--evaluate")
    assert code == 2 and report is None and stderr.count("\n") == 1, stderr
    assert stderr.startswith("collect.run: error: cannot reach the student at http://127.0.0.1:9/v1")
    assert leftovers(client) == []


def test_a_student_that_dies_mid_run_is_a_student_error(tmp_path: Path, client: Any, cli: Path,
                                                        plain_tag: str) -> None:
    def dies(request: dict[str, Any]) -> Reply:
        if "connectivity check" in json.dumps(request.get("messages")):
            return claude_student(request)
        return Reply({"error": {"message": "engine dead", "type": "InternalServerError", "code": 500}},
                     status=500, headers={"retry-after": "0"})

    with VLLMServer(toy_policy(), intercept=dies) as server:
        code, report, stderr = collect(tmp_path, [toy_instance("toy__calc-1", "fix")], server.url, plain_tag,
                                       "--claude-binary", str(cli), "--evaluate")
    assert code == 1, stderr
    outcome = report["outcomes"][0]
    assert (outcome["exit_status"], outcome["reward"], outcome["error_kind"]) == (
        "student_error", None, "student_error")
    assert "the student answered HTTP 500: engine dead" in outcome["error"]
    assert leftovers(client) == []
