"""replay.loop: its bad input (main tier), and two rounds end to end on the toy instances with a tiny
tool-calling student served by the real `transformers serve`, killed in every stage and resumed (docker).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.llm_server import LLMServer, Reply, chat_completion
from tests.loop_student import CALL, PREFERRED, TOOLS, build_calling_student

ROOT = Path(__file__).resolve().parents[1]
HELD, TRAIN = ["toy__calc-31"], ["toy__calc-32", "toy__calc-33"]


def loop(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replay.loop", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_calling_student(tmp_path_factory.mktemp("student") / "round-0")


def write_rows(path: Path, ids: list[str]) -> Path:
    from tests.collect_toy import toy_instance

    # The instance id in each problem statement: states differ between instances, as real ones do.
    path.write_text("".join(json.dumps(toy_instance(i, i)) + "\n" for i in ids))
    return path


def base_args(tmp_path: Path, student: str, teachers: str = "t=openai/t@http://127.0.0.1:9/v1") -> list[str]:
    return ["--instances", str(write_rows(tmp_path / "train.jsonl", TRAIN)),
            "--held-out", str(write_rows(tmp_path / "held.jsonl", HELD)), "--student", student,
            "--teachers", teachers, "--out", str(tmp_path / "out")]


# --- bad input: one line, exit 2, before anything runs -----------------------------------------------

@pytest.mark.parametrize("case", ["not_a_model", "no_folder", "no_gpu", "unreachable_url", "no_instances"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    model = ROOT / "tests"                       # a folder, but no model in it
    args = base_args(tmp_path, str(model))
    if case == "no_folder":
        args = base_args(tmp_path, str(tmp_path / "missing"))
    elif case in ("no_gpu", "unreachable_url"):
        (folder / "config.json").write_text("{}")
        (folder / "tokenizer.json").write_text("{}")
        args = base_args(tmp_path, str(folder))
        args += ["--engine", "vllm"] if case == "no_gpu" else ["--engine", "url", "--url",
                                                               "http://127.0.0.1:9/v1"]
    elif case == "no_instances":
        (folder / "config.json").write_text("{}")
        (folder / "tokenizer.json").write_text("{}")
        args = base_args(tmp_path, str(folder))
        args[1] = str(tmp_path / "nothing.jsonl")
    done = loop(*args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("replay.loop: error: "), done.stderr
    expected = {"not_a_model": "not a model folder", "no_folder": "no such folder", "no_gpu": "--engine vllm",
                "unreachable_url": "unreachable", "no_instances": "--instances"}[case]
    assert expected in lines[0]
    assert not (tmp_path / "out" / "loop.json").exists()


# --- serving: tool calls come back as tool_calls -----------------------------------------------------

def test_transformers_serve_returns_the_students_calls_as_tool_calls(tmp_path: Path, student: Path) -> None:
    """The loop's own engine starts `transformers serve`; the tiny student's `<tool_call>` text comes back
    parsed (as vLLM's parsers return it), and the server is gone once the engine is closed."""
    from replay.loop.config import LoopConfig
    from replay.loop.run import student as round_student
    from replay.loop.serving import open_engine

    config = LoopConfig(instances=tmp_path / "i", held_out=tmp_path / "h", student=str(student), teachers="t",
                        out=tmp_path, device="cpu")
    engine = open_engine(config)
    try:
        who = round_student(config, 0)
        url = engine.url(who)
        body = {"model": who.name, "messages": [{"role": "user", "content": "Fix the failing test"}],
                "tools": TOOLS, "max_tokens": 64, "temperature": 0}
        answer = httpx.post(f"{url}/chat/completions", json=body, timeout=120).json()
        pid = next(iter(engine.processes.values())).popen.pid
    finally:
        engine.close()
    message = answer["choices"][0]["message"]
    assert [c["function"]["name"] for c in message["tool_calls"]] == [CALL["name"]]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == CALL["arguments"]
    assert not Path(f"/proc/{pid}").exists() or b"zombie" in Path(f"/proc/{pid}/status").read_bytes().lower()
    assert not (tmp_path / "servers.json").exists()


# --- two rounds end to end, killed in every stage ----------------------------------------------------

class Teacher:
    """Every teacher prefers reading calc.py to listing the folder (the student's habit). A little slow, as
    a real one is, and counting the calls it is still answering: a kill that lands while none is in
    flight must lose no answer."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self.lock:
            self.in_flight += 1
        time.sleep(0.3)
        with self.lock:
            self.in_flight -= 1
        return Reply(chat_completion("", [PREFERRED], model=request.get("model", "t"), prompt_tokens=1000,
                                     completion_tokens=10))


def _settled(teachers: LLMServer, teacher: Teacher, asked: int) -> bool:
    """Some teacher answered since `asked`, and for 0.15 s no call has been in flight or come in."""
    seen = len(teachers.requests)
    if seen <= asked or teacher.in_flight:
        return False
    time.sleep(0.15)
    return len(teachers.requests) == seen and not teacher.in_flight


def _running(out: Path) -> tuple[int, str] | None:
    try:
        running = json.loads((out / "loop.json").read_text()).get("running")
    except (OSError, json.JSONDecodeError):
        return None
    return (running["round"], running["stage"]) if running else None


def _begun(out: Path, where: tuple[int, str]) -> bool:
    """The stage's command has been started (its command line is in its log)."""
    log = out / "logs" / f"round-{where[0]}-{where[1]}.log"
    return log.is_file() and log.read_text(errors="replace").count("$ ") > _kills.get(where, 0)


_kills: dict[tuple[int, str], int] = {}


@pytest.mark.docker
def test_two_rounds_killed_in_every_stage_resume_to_the_end(tmp_path: Path, client: Any,
                                                            student: Path) -> None:
    from tests.collect_toy import NAMESPACE, ensure_instance_images

    tag = ensure_instance_images(client, HELD + TRAIN)
    teacher = Teacher()
    with LLMServer(teacher) as teachers:
        pool = f"t1=openai/t1@{teachers.url}#price=1/2,t2=openai/t2@{teachers.url}#price=1/2"
        args = [*base_args(tmp_path, str(student), pool), "--rounds", "2", "--device", "cpu", "--cpu",
                "--max-turns", "2", "--max-tokens", "64", "--samples", "2", "--test-split", "0.5",
                "--max-steps", "4", "--learning-rate", "0.05", "--batch-size", "2",
                "--collect-args", f"--namespace {NAMESPACE} --image-tag {tag}"]
        out = tmp_path / "out"
        # Every stage is killed once just after its command started; a stage that asks teachers is killed
        # once more after a teacher answered (when it has anything new to ask: later rounds may find every
        # state in the cache).
        _kills.clear()
        for _ in range(40):
            process = subprocess.Popen([sys.executable, "-m", "replay.loop", *args], cwd=ROOT,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            asked = len(teachers.requests)
            while process.poll() is None:
                where = _running(out)
                if where is not None and _begun(out, where) and (
                        not _kills.get(where) or (_kills[where] == 1 and where[1] in ("pairs", "heldout")
                                                  and _settled(teachers, teacher, asked))):
                    process.send_signal(signal.SIGTERM)
                    break
                time.sleep(0.05)
            stdout, stderr = process.communicate(timeout=600)
            if process.returncode == 0:
                break
            assert process.returncode == 143, stderr          # killed by us, nothing else
            assert "interrupted (SIGTERM)" in stderr
            assert not (out / "servers.json").exists()       # its servers stopped on the way out
            landed = _running(out)                           # the stage the kill landed in
            _kills[landed] = _kills.get(landed, 0) + 1
        else:
            pytest.fail(f"the loop did not finish: killed at {_kills}")
    ledger = json.loads((out / "loop.json").read_text())
    stages = {(int(r), s) for r, data in ledger["rounds"].items() for s in data["stages"]}
    every = {(0, "resolve"), (0, "heldout"), (0, "eval")} | {
        (r, s) for r in (1, 2) for s in ("collect", "pairs", "train", "resolve", "eval")}
    assert stages == every and set(_kills) == every and ledger["running"] is None
    assert _kills[(0, "heldout")] == 2 and _kills[(1, "pairs")] == 2     # killed while asking, too

    # Each stage's command ran once per kill of that stage and once to its end: never after it finished.
    for where in every:
        log = (out / "logs" / f"round-{where[0]}-{where[1]}.log").read_text()
        assert log.count("$ ") == _kills[where] + 1, where

    # No teacher call was paid twice: every request the teachers got is distinct (answers received
    # before a kill are in the loop's cache).
    asked = [json.dumps([r["model"], r["messages"]], sort_keys=True) for r in teachers.requests]
    assert len(asked) == len(set(asked)) > 0

    # Round 2 collected with round 1's weights: its requests named round 1's folder, which the server
    # loaded, and those weights are not round 0's.
    round1 = (out / "round-1" / "student").resolve()
    assert ledger["rounds"]["2"]["stages"]["collect"]["student"] == str(round1)
    assert ledger["rounds"]["1"]["stages"]["collect"]["student"] == str(student.resolve())
    rollouts = sorted((out / "round-2" / "collect").glob("*.rollout.jsonl"))
    assert rollouts and all(json.loads(p.read_text().splitlines()[0])["student_model"] == str(round1)
                            for p in rollouts)
    weights = [(folder / "model.safetensors").read_bytes() for folder in (student, round1)]
    assert weights[0] != weights[1]
    served = "".join(p.read_text(errors="replace") for p in (out / "logs").glob("serve-*.log"))
    assert f"Model: {round1}" in served

    # replay.eval asked round 0 and round K at the held-out states; both answered.
    for round_ in (1, 2):
        evaluation = ledger["rounds"][str(round_)]["stages"]["eval"]
        assert set(evaluation["models"]) == {"round-0", f"round-{round_}"}
        assert all(m["answered"] > 0 for m in evaluation["models"].values())
        assert f"round-{round_} - round-0" in evaluation["differences"]
    # Figures per round: resolve rate, pairs, USD, student tokens, held-out accuracy, seconds.
    for round_ in (0, 1, 2):
        stages_ = ledger["rounds"][str(round_)]["stages"]
        assert stages_["resolve"]["resolve"]["evaluated"] == len(HELD)
        assert all(s["seconds"] >= 0 for s in stages_.values())
    for round_ in (1, 2):
        stages_ = ledger["rounds"][str(round_)]["stages"]
        assert stages_["pairs"]["pairs"] > 0
        assert stages_["collect"]["student_tokens"]["completion"] > 0
        assert stages_["train"]["held_out"]["after"]
    # USD: what the stage paid over all its attempts (round 1's states were new; round 2's may all be in
    # the cache), from the cache, though the attempt that finished found every answer there.
    answered = {(r, s): ledger["rounds"][str(r)]["stages"][s] for r, s in ((0, "heldout"), (1, "pairs"))}
    assert all(a["teacher_calls"] > 0 and a["teacher_usd"] > 0 for a in answered.values())
    assert sum(ledger["rounds"][r]["stages"]["pairs"]["teacher_calls"] for r in ("1", "2")) + \
        answered[(0, "heldout")]["teacher_calls"] == len(teachers.requests)
    text = (out / "loop.md").read_text()
    assert "| 2 |" in text and (out / "loop.png").stat().st_size > 0
