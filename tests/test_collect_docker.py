"""collect.run end to end on a real docker engine: `pytest -m docker` (after `.ci/docker.sh`).

A toy SWE-bench instance image is built offline once (tests/collect_toy.py), a scripted student behind
a server that answers like vLLM 0.33 (tests/vllm_server.py: reasoning, `content: null`, token ids with
EOS, prompt ids from a chat template, context errors) plays the student, the swebench harness grades.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collect.runtime import LABEL, containers
from ingestion.rollouts import is_rollout_file, iter_rollout_states
from ingestion.stats import IngestStats
from ingestion.store import load_states
from tests.collect_toy import NAMESPACE, ensure_instance_images, toy_instance, toy_policy
from tests.llm_server import LLMServer
from tests.test_collect_official import anthropic_student
from tests.vllm_server import EOS, VLLMConfig, VLLMServer

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[1]
IDS = ["toy__calc-1", "toy__calc-2", "toy__calc-4"]
CONTEXT = 1500           # the toy fix fits; rereading calc.py for ever does not


@pytest.fixture(scope="session")
def image_tag(client: Any) -> str:
    return ensure_instance_images(client, IDS)


def leftovers(client: Any) -> list[str]:
    """Containers of any collect run: ours by label, the harness's by its `sweb.eval.` name."""
    ours = containers(client, {"label": LABEL})
    graders = [c for c in containers(client) if c.name.startswith("sweb.eval.toy")]
    return [c.name for c in ours + graders]


def command(tmp_path: Path, rows: list[Any], url: str, tag: str, *extra: str) -> list[str]:
    instances = tmp_path / "instances.jsonl"
    instances.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return [sys.executable, "-m", "collect.run", "--instances", str(instances), "--student-url", url,
            "--student-model", "student", "--out", str(tmp_path / "out"), "--namespace", NAMESPACE,
            "--image-tag", tag, *extra]


def collect(tmp_path: Path, rows: list[Any], url: str, tag: str, *extra: str) -> tuple[int, dict, str]:
    done = subprocess.run(command(tmp_path, rows, url, tag, *extra), cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    report = json.loads((tmp_path / "out/report.json").read_text())
    return done.returncode, report, done.stderr


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rollouts_are_graded_by_the_swebench_harness(tmp_path: Path, client: Any, image_tag: str) -> None:
    rows = [toy_instance("toy__calc-1", "fix"), toy_instance("toy__calc-2", "nofix"),
            {"instance_id": "toy__calc-3", "repo": "toy/calc"},                    # missing fields
            toy_instance("toy__calc-9", "fix"),                                   # no such image
            toy_instance("toy__calc-2", "fix")]                                   # a duplicate
    # A 0.33-shaped server that keeps the "\n\n" before <tool_call> as content: the whitespace case.
    shape = VLLMConfig(version="0.33", max_model_len=CONTEXT, keeps_blank_content=True)
    with VLLMServer(toy_policy(), shape) as server:
        code, report, stderr = collect(tmp_path, rows, server.url, image_tag, "--workers", "2", "--evaluate",
                                       "--temperature", "0.7", "--top-p", "0.95")
    assert code == 0, stderr
    outcomes = {o["instance_id"]: o for o in report["outcomes"] if "duplicate" not in (o["error"] or "")}
    assert (outcomes["toy__calc-1"]["reward"], outcomes["toy__calc-2"]["reward"]) == (1.0, 0.0)
    assert report["sampling"] == {"temperature": 0.7, "top_p": 0.95}
    assert report["logprobs_mode"] == "raw_logprobs"
    assert report["servers"] == [{"url": server.url, "provider": None, "model": "student",
                                  "max_model_len": CONTEXT, "tool_calls": "parsed", "token_ids": True,
                                  "reasoning_field": "reasoning", "token_extension_dropped": None}]
    assert outcomes["toy__calc-3"]["error_kind"] == "invalid_instance"
    assert "missing fields problem_statement" in outcomes["toy__calc-3"]["error"]
    assert outcomes["toy__calc-9"]["error_kind"] == "image_not_found"
    assert "duplicate instance_id toy__calc-2 (row 2 has it)" in [o["error"] for o in report["outcomes"]]
    assert "sweb.eval.x86_64.toy_1776_calc-9" in outcomes["toy__calc-9"]["error"]
    assert {k: report[k] for k in ("instances", "rollouts", "ok", "evaluated", "resolved", "errors")} == {
        "instances": 5, "rollouts": 2, "ok": 2, "evaluated": 2, "resolved": 1,
        "errors": {"invalid_instance": 2, "image_not_found": 1}}
    assert report["prefix_breaks"] == {server.url: 0}

    fixed = records(tmp_path / "out/toy__calc-1.rollout.jsonl")
    assert [r["type"] for r in fixed] == ["header", "turn", "turn", "turn", "turn", "final"]
    assert fixed[0]["image"] == f"{NAMESPACE}/sweb.eval.x86_64.toy_1776_calc-1:{image_tag}"
    assert {k: fixed[0][k] for k in ("sampling", "logprobs_mode", "reasoning_echo", "max_model_len")} == {
        "sampling": {"temperature": 0.7, "top_p": 0.95}, "logprobs_mode": "raw_logprobs",
        "reasoning_echo": "field", "max_model_len": CONTEXT}
    for turn in fixed[1:-1]:           # vLLM 0.33's shapes, as recorded
        assert turn["completion_token_ids"][-1] == EOS and turn["reasoning"].startswith("\nTurn ")
        assert len(turn["logprobs"]) == len(turn["completion_token_ids"]) == len(turn["tokens"])
        assert turn["prompt_token_ids"] and turn["usage"]["prompt_tokens"] == len(turn["prompt_token_ids"])
    assert all(call["id"].startswith("chatcmpl-tool-") for turn in fixed[1:-2]
               for call in turn["response"]["tool_calls"])
    assert fixed[1]["observations"][0]["output"].startswith("def add(a, b):\n    return a - b")
    assert fixed[3]["observations"][0]["output"] == "5\n[exit code: 0]"        # the edit took effect
    assert fixed[1]["response"]["content"] == "\n\n"                 # as the server answered, beside calls
    thought, _, rest = fixed[1]["completion_text"].partition("</think>")     # went back as generated
    assert fixed[2]["messages"][2] == {"role": "assistant", "content": rest, "reasoning": thought[7:]}
    assert [turn["prefix_ok"] for turn in fixed[1:-1]] == [None, True, True, True]
    final = fixed[-1]
    assert "-    return a - b\n+    return a + b" in final["patch"]
    assert final["evaluation"]["tests_status"]["FAIL_TO_PASS"]["success"] == ["tests/test_calc.py::test_add"]
    unfixed = records(tmp_path / "out/toy__calc-2.rollout.jsonl")[-1]
    assert "+++ b/NOTES.md" in unfixed["patch"] and unfixed["resolved"] is False

    # what `replay.run --source DIR --dry-run` will read: one state per student turn
    stats = IngestStats()
    files = sorted(p for p in (tmp_path / "out").iterdir() if is_rollout_file(p))
    states = [s for path in files for s in iter_rollout_states(path, stats)]
    assert [(s.metadata["instance_id"], s.turn) for s in states] == [
        ("toy__calc-1", 0), ("toy__calc-1", 1), ("toy__calc-1", 2), ("toy__calc-1", 3),
        ("toy__calc-2", 0), ("toy__calc-2", 1), ("toy__calc-2", 2)]
    assert all(s.metadata["completion_token_ids"] and s.metadata["prompt_token_ids"] for s in states)
    assert all(len(s.metadata["logprobs"]) == len(s.metadata["completion_token_ids"]) for s in states)
    for before, after in zip(states, states[1:], strict=False):      # each prompt extends the last
        if before.trace_id == after.trace_id:
            prefix = before.metadata["prompt_token_ids"] + before.metadata["completion_token_ids"]
            assert after.metadata["prompt_token_ids"][:len(prefix)] == prefix
    assert {s.metadata["instance_id"]: s.metadata["reward"] for s in states} == {"toy__calc-1": 1.0,
                                                                                  "toy__calc-2": 0.0}
    assert states[1].student_action.tool_calls[0].arguments["command"] == "str_replace"
    assert not stats.problems and stats.states == report["turns"] == 7

    # and the CLI itself on the rollout dir
    from replay.run import main as replay_main

    args = ["--source", str(tmp_path / "out"), "--out", str(tmp_path / "states"), "--dry-run"]
    assert replay_main(args) == 0
    written = [s.model_dump(mode="json") for s in load_states(tmp_path / "states")]
    assert [(s["source"], s["metadata"]["instance_id"], s["turn"]) for s in written] == [
        ("swebench_rollout", s.metadata["instance_id"], s.turn) for s in states]
    assert all(s["metadata"]["logprobs"] and s["metadata"]["reward"] is not None for s in written)
    assert leftovers(client) == []


def test_a_context_overflow_is_graded_as_it_stands(tmp_path: Path, client: Any, image_tag: str) -> None:
    with VLLMServer(toy_policy(), VLLMConfig(version="0.33", max_model_len=CONTEXT)) as server:
        code, report, stderr = collect(tmp_path, [toy_instance("toy__calc-4", "overflow")], server.url,
                                       image_tag, "--evaluate", "--max-turns", "60")
    assert code == 0, stderr
    [outcome] = report["outcomes"]
    assert (outcome["exit_status"], outcome["reward"]) == ("context_overflow", 1.0)
    assert outcome["error_kind"] is None                # the student's own end, not an infrastructure error
    final = records(tmp_path / "out/toy__calc-4.rollout.jsonl")[-1]
    assert "+    return a + b" in final["patch"] and final["resolved"] is True
    assert f"maximum context length is {CONTEXT} tokens" in final["error"]
    assert leftovers(client) == []


def test_a_run_in_which_no_rollout_takes_a_turn_says_so_and_exits_1(tmp_path: Path, client: Any,
                                                                   image_tag: str) -> None:
    """#47 item 5: a student served with too short a context overflows at turn 0 in every rollout; the
    summary says so by exit status and the run fails unless --allow-empty. 600 tokens hold the start-up
    probe (~540: a short prompt and the tools; a context that does not is one error line, exit 2) but not
    the first turn (~860: the system prompt, the task and the tools)."""
    rows = [toy_instance(i, "overflow") for i in IDS[:2]]
    with VLLMServer(toy_policy(), VLLMConfig(version="0.33", max_model_len=600)) as server:
        done = subprocess.run(command(tmp_path, rows, server.url, image_tag), cwd=ROOT, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 1, done.stderr
        assert "2 rollouts: 2 context_overflow, 0 turns" in done.stdout and "NO TURNS" in done.stdout
        assert "no rollout took a turn (2 context_overflow" in done.stderr
        allowed = subprocess.run(command(tmp_path, rows, server.url, image_tag, "--allow-empty"), cwd=ROOT,
                                 capture_output=True, text=True, timeout=300)
    assert allowed.returncode == 0, allowed.stderr
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["exit_status"] == {"context_overflow": 2} and report["turns"] == 0
    assert all("maximum context length is 600 tokens" in o["error"] for o in report["outcomes"])
    assert leftovers(client) == []


def test_an_official_api_student_is_graded_without_token_ids(tmp_path: Path, client: Any,
                                                             image_tag: str) -> None:
    with LLMServer(anthropic_student) as server:
        code, report, stderr = collect(tmp_path, [toy_instance("toy__calc-1", "fix")],
                                       server.url.removesuffix("/v1"), image_tag, "--evaluate",
                                       "--student-provider", "anthropic", "--api-key", "sk-test")
    assert code == 0, stderr
    [outcome] = report["outcomes"]
    assert (outcome["reward"], outcome["turns"], outcome["turns_with_token_ids"]) == (1.0, 4, 0)
    header = records(tmp_path / "out/toy__calc-1.rollout.jsonl")[0]
    assert (header["student_provider"], header["logprobs_mode"]) == ("anthropic", None)
    assert "sk-test" not in (tmp_path / "out/toy__calc-1.rollout.jsonl").read_text()
    assert leftovers(client) == []


def test_an_unreachable_student_stops_the_run_before_any_container(tmp_path: Path, client: Any,
                                                                   image_tag: str) -> None:
    rows = [toy_instance("toy__calc-1", "fix"), toy_instance("toy__calc-2", "fix")]
    done = subprocess.run(command(tmp_path, rows, "http://127.0.0.1:9/v1", image_tag, "--workers", "2"),
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("collect.run: error: cannot reach the student at http://127.0.0.1:9/v1")
    assert not (tmp_path / "out").exists() and leftovers(client) == []


def test_a_command_that_hangs_is_killed_at_the_timeout(tmp_path: Path, client: Any, image_tag: str) -> None:
    with VLLMServer(toy_policy()) as server:
        code, report, stderr = collect(tmp_path, [toy_instance("toy__calc-1", "slow")], server.url, image_tag,
                                       "--command-timeout", "2")
    assert code == 0, stderr
    observation = records(tmp_path / "out/toy__calc-1.rollout.jsonl")[1]["observations"][0]
    assert observation["timed_out"] is True and observation["exit_code"] == 124
    assert observation["output"].startswith("start\n[timed out")
    assert leftovers(client) == []


def test_sigint_removes_every_container(tmp_path: Path, client: Any, image_tag: str) -> None:
    rows = [toy_instance("toy__calc-1", "sleepy"), toy_instance("toy__calc-2", "sleepy")]
    with VLLMServer(toy_policy()) as server:
        # started in the background by a script, as a batch job would: SIGINT arrives ignored
        pid = tmp_path / "pid"
        script = " ".join(command(tmp_path, rows, server.url, image_tag, "--workers", "2")) + \
            f" & echo $! > {pid}; wait $!"
        process = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while (len(server.requests) < 3 or len(leftovers(client)) < 2) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)                                    # both agents are inside `sleep 300` now
        assert len(leftovers(client)) == 2
        os.kill(int(pid.read_text()), signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert leftovers(client) == []
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["interrupted"] is True and report["errors"] == {"interrupted": 2}
    final = records(tmp_path / "out/toy__calc-1.rollout.jsonl")[-1]
    assert (final["type"], final["exit_status"]) == ("final", "interrupted")
