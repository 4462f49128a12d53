"""#57's teachers and controls, no model and no docker: the fixing teacher works an instance step by step,
the no-signal teacher answers exactly the student's action (replay.run then makes no pair), and
`replay.run --swap-pairs` gives the same pairs as without it, chosen and rejected exchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from replay.run import main
from tests.learning_teachers import TEST_COMMAND, EchoTeacher, FixingTeacher
from tests.llm_server import LLMServer
from tests.sessions import assistant, text, tool_result, tool_use, user, write_session
from tests.task_family import HELD_OUT, instance, tasks
from tests.teacher_script import scripted

TRAIN = next(t for t in tasks() if t.package not in HELD_OUT)
HELD = next(t for t in tasks() if t.package in HELD_OUT)


def issue(task: Any) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are an autonomous software engineer."},
            {"role": "user",
             "content": f"Solve this issue.\n\n<issue>\n{instance(task)['problem_statement']}\n</issue>"}]


def called(name: str, arguments: dict[str, Any], output: str, n: int) -> list[dict[str, Any]]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return [{"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": output}]


def reply(teacher: Any, messages: list[dict[str, Any]]) -> Any:
    message = teacher({"model": "t", "messages": messages}).body["choices"][0]["message"]
    calls = message.get("tool_calls") or []
    steps = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]
    return steps or message["content"]


def test_the_fixing_teacher_reads_edits_tests_and_stops() -> None:
    teacher, messages = FixingTeacher(), issue(TRAIN)
    assert reply(teacher, messages) == [("bash", {"command": f"cat {TRAIN.path}"})]
    messages += called("bash", {"command": "ls"}, TRAIN.path, 0)          # a look around changes nothing
    assert reply(teacher, messages) == [("bash", {"command": f"cat {TRAIN.path}"})]
    messages += called("bash", {"command": f"cat {TRAIN.path}"}, "...", 1)
    edit = {"command": "str_replace", "path": TRAIN.path, "old_str": TRAIN.wrong, "new_str": TRAIN.right}
    assert reply(teacher, messages) == [("edit", edit)]
    messages += called("edit", edit, "edited", 2)
    assert reply(teacher, messages) == [("bash", {"command": TEST_COMMAND})]
    messages += called("bash", {"command": TEST_COMMAND}, "9 passed", 3)
    assert isinstance(reply(teacher, messages), str)
    # Every instance: its statement finds it, and its fix is the snippet the table names.
    for task in tasks():
        assert teacher.task(issue(task)) == task


def session(task: Any) -> list[dict[str, Any]]:
    """A student's session on a family instance: it looks around, reads a file, and gives up."""
    statement = instance(task)["problem_statement"]
    return [user("u1", None, statement),
            assistant("a1", "u1", "msg_1", tool_use("toolu_1", "ls")),
            user("u2", "a1", tool_result("toolu_1", f"{task.path}\ntests")),
            assistant("a2", "u2", "msg_2", tool_use("toolu_2", "head -3 README")),
            user("u3", "a2", tool_result("toolu_2", "no README")),
            assistant("a3", "u3", "msg_3", text("I could not find the bug."))]


def run(tmp_path: Path, out: str, teachers: str, *extra: str) -> dict[str, Any]:
    assert main(["--source", str(tmp_path / "sessions"), "--out", str(tmp_path / out), "--teachers", teachers,
                 "--cache", str(tmp_path / f"{out}.sqlite"), *extra]) == 0
    return json.loads((tmp_path / out / "report.json").read_text())


def test_the_no_signal_teacher_answers_the_students_action(tmp_path: Path) -> None:
    write_session(tmp_path / "sessions", session(TRAIN))
    teacher = EchoTeacher(tmp_path, {HELD.instance_id})
    with LLMServer(teacher) as server:
        report = run(tmp_path, "echo", f"e1=openai/e1@{server.url},e2=openai/e2@{server.url}")
    assert teacher.misses == 0
    assert report["states"] == 3 and report["pairs"] == 0
    verdicts = [json.loads(line) for line in (tmp_path / "echo" / "verdicts.jsonl").read_text().splitlines()]
    assert [v["verdict"] for v in verdicts] == ["agree"] * 3, verdicts
    # A held-out instance's state gets the fix: the yardstick is the real pool's.
    assert reply(teacher, issue(HELD)) == [("bash", {"command": f"cat {HELD.path}"})]


@pytest.mark.parametrize("fmt", ["dpo", "sft"])
def test_swapped_pairs_are_the_pairs_with_chosen_and_rejected_exchanged(tmp_path: Path, fmt: str) -> None:
    write_session(tmp_path / "sessions", session(TRAIN))
    with LLMServer(lambda body: scripted(body, agreeing=("a", "b"))) as server:
        pool = f"a=openai/a@{server.url},b=openai/b@{server.url}"
        plain = run(tmp_path, "plain", pool, "--format", "dpo")
        swapped = run(tmp_path, "swapped", pool, "--format", fmt, "--swap-pairs")
    rows = [json.loads(line) for line in (tmp_path / "plain" / "pairs.jsonl").read_text().splitlines()]
    turned = [json.loads(line) for line in (tmp_path / "swapped" / "pairs.jsonl").read_text().splitlines()]
    assert plain["pairs"] >= 2 and swapped["extra"]["swapped"] == plain["pairs"]
    if fmt == "dpo":
        assert [(r["chosen"], r["rejected"]) for r in turned] == [(r["rejected"], r["chosen"]) for r in rows]
    else:   # SFT imitates the student's own actions at the pair states
        assert [r["completion"] for r in turned] == [r["rejected"] for r in rows]
    assert [r["state_id"] for r in turned] == [r["state_id"] for r in rows]


def test_a_round_without_training_rows_is_its_parent(tmp_path: Path) -> None:
    """The no-signal control's DPO rounds: every state agrees, replay.run writes no row, and replay.loop
    serves round K-1 as round K instead of failing in replay.train (which refuses an empty dataset)."""
    from replay.loop.config import LoopConfig
    from replay.loop.run import Loop, student

    base = tmp_path / "smol"
    base.mkdir()
    (base / "config.json").write_text("{}")
    config = LoopConfig(instances=tmp_path / "t.jsonl", held_out=tmp_path / "h.jsonl", student=str(base),
                        teachers="x", out=tmp_path / "loop")
    loop = Loop(config, engine=None, ledger=None)  # type: ignore[arg-type]  # train calls neither
    for round_ in (1, 2):
        pairs = config.out / f"round-{round_}" / "pairs"
        pairs.mkdir(parents=True)
        (pairs / "report.json").write_text(json.dumps({"pairs": 0, "extra": {"dataset_rows": 0,
                                                                              "splits": {"train": 0}}}))
        figures = loop.train(round_)
        assert figures["skipped"].startswith("no training rows") and figures["held_out"] is None
        served = Path(student(config, round_).folder)
        assert (served / "config.json").read_text() == "{}"


# A stand-in for vLLM's interpreter: `-c` (the build check) says "cpu"; `-m vllm...api_server ARGS` writes
# its ARGS to argv.json beside it and answers /health on the --port it was given.
FAKE_VLLM = r'''#!/bin/sh
if [ "$1" = "-c" ]; then echo cpu; exit 0; fi
exec "{python}" -c '
import http.server, json, pathlib, sys
args = sys.argv[3:]
pathlib.Path("{folder}", "argv.json").write_text(json.dumps(args))
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{{}}")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(args[args.index("--port") + 1])), Health).serve_forever()
' "$@"
'''


def test_vllm_serves_an_untrained_round_as_its_parent(tmp_path: Path) -> None:
    """With --engine vllm, a round without training rows is round 0 under its own name while no round has
    trained (vLLM's --served-model-name takes several), and the last trained round's adapter after."""
    import os
    import sys

    from replay.loop.config import LoopConfig, LoopError
    from replay.loop.run import Loop, student
    from replay.loop.serving import VllmEngine

    fake = tmp_path / "python"
    fake.write_text(FAKE_VLLM.format(python=sys.executable, folder=tmp_path))
    os.chmod(fake, 0o755)
    base = tmp_path / "smol"
    base.mkdir()
    (base / "config.json").write_text("{}")
    config = LoopConfig(instances=tmp_path / "t.jsonl", held_out=tmp_path / "h.jsonl", student=str(base),
                        teachers="x", out=tmp_path / "loop", engine="vllm", vllm_python=str(fake))
    config.out.mkdir()
    engine = VllmEngine(config)
    loop = Loop(config, engine=engine, ledger=None)  # type: ignore[arg-type]  # train calls no ledger

    def served(round_: int) -> list[str]:
        engine.url(student(config, round_))
        argv = json.loads((tmp_path / "argv.json").read_text())
        names = argv[argv.index("--served-model-name") + 1:]
        return names[:next((i for i, a in enumerate(names) if a.startswith("--")), len(names))] + \
            [a for a in argv if "=" in a and a.startswith("round-")]

    try:
        for round_ in (1, 2, 3):
            pairs = config.out / f"round-{round_}" / "pairs"
            pairs.mkdir(parents=True)
            rows = 0 if round_ < 3 else 4
            (pairs / "report.json").write_text(json.dumps({"extra": {"splits": {"train": rows}}}))
            if rows:   # a trained round: its adapter, as replay.train saves it
                trained = config.out / f"round-{round_}" / "trained"
                trained.mkdir()
                (trained / "adapter_config.json").write_text("{}")
            else:
                assert loop.train(round_)["skipped"].startswith("no training rows")
        assert served(1) == ["round-0", "round-1"]
        assert served(2) == ["round-0", "round-1", "round-2"]
        trained = str((config.out / "round-3" / "trained").resolve())
        assert served(3) == ["round-0", "round-1", "round-2", f"round-3={trained}"]
        # an adapter gone after its round trained is an error, never round 0 served in its place
        shutil.rmtree(trained)
        with pytest.raises(LoopError, match="round 3: its adapter .* is missing"):
            engine.url(student(config, 3))
    finally:
        engine.close()
