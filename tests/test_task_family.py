"""#57's task family (tests/task_family.py): its shape without docker, and on the docker tier that the
swebench harness grades its instances as SWE-bench's: the gold patch resolves, a patch that fixes nothing
does not, and the fixing teacher, played as the student by collect.run --evaluate, resolves them."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.learning_teachers import FixingTeacher
from tests.llm_server import LLMServer, Reply, chat_completion
from tests.task_family import HELD_OUT, KINDS, instance, module_text, split, tasks

ROOT = Path(__file__).resolve().parents[1]


def outcome(module: str, checks: tuple[str, ...]) -> bool:
    space: dict[str, Any] = {}
    exec(compile(module, "<module>", "exec"), space)  # noqa: S102 - the family's own table
    try:
        return all(eval(check, space) for check in checks)  # noqa: S307
    except Exception:  # noqa: BLE001 - a bug that raises fails the test as pytest would
        return False


def test_sixty_instances_five_kinds_six_packages_split_by_package() -> None:
    rows = [instance(t) for t in tasks()]
    assert len(rows) == 60 and len({r["instance_id"] for r in rows}) == 60
    assert Counter(t.kind for t in tasks()) == dict.fromkeys(KINDS, 12)
    assert len({r["problem_statement"] for r in rows}) == 60
    train, held = split()
    assert (len(train), len(held)) == (40, 20)
    assert {r["repo"] for r in train}.isdisjoint({r["repo"] for r in held})
    assert {r["repo"] for r in held} == {f"tiny/{p}" for p in HELD_OUT}
    assert rows == [instance(t) for t in tasks()]      # deterministic: the same rows every time


@pytest.mark.parametrize("task", tasks(), ids=lambda t: t.instance_id)
def test_the_bug_fails_its_test_only_and_the_fix_passes_all(task: Any) -> None:
    buggy, fixed = module_text(task.package, task), module_text(task.package)
    assert not outcome(buggy, task.asserts) and outcome(fixed, task.asserts)
    others = [t for t in tasks() if t.package == task.package and t.index != task.index]
    assert all(outcome(buggy, t.asserts) and outcome(fixed, t.asserts) for t in others)
    row = instance(task)
    assert json.loads(row["FAIL_TO_PASS"]) == [f"tests/test_issue.py::test_{task.function}"]
    assert len(json.loads(row["PASS_TO_PASS"])) == 9


# --- the docker tier -----------------------------------------------------------------------------------

SAMPLE = [t for t in tasks() if t.index in (0, 3) and t.package in ("mathkit", "timekit")] + \
    [next(t for t in tasks() if t.kind == kind and t.package == "listkit") for kind in
     ("constant", "swapped_args", "missing_return")]


@pytest.mark.docker
def test_the_harness_resolves_the_gold_patch_and_not_a_no_fix_one(client: Any, tmp_path: Path) -> None:
    from collect.evaluate import grade_patch, use_log_dir
    from collect.instances import image_name
    from tests.collect_toy import NAMESPACE
    from tests.task_family import ensure_images

    rows = [instance(t) for t in SAMPLE]
    tag, built = ensure_images(client, rows)
    print(f"built {len(built)} images: {built}")
    use_log_dir(tmp_path / "logs")
    noop = ("diff --git a/NOTES.md b/NOTES.md\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.md\n"
            "@@ -0,0 +1 @@\n+looked, changed nothing\n")
    for row in rows:
        image = image_name(row["instance_id"], NAMESPACE, tag)
        grades = {name: grade_patch(client, row, image, patch, "check", f"fam{uuid.uuid4().hex[:6]}", 120,
                                    tmp_path / "logs")
                  for name, patch in (("gold", row["patch"]), ("noop", noop), ("empty", ""))}
        assert grades["gold"].resolved is True, (row["instance_id"], grades["gold"])
        assert grades["noop"].resolved is False and grades["noop"].error is None, grades["noop"]
        assert grades["empty"].resolved is False
        report = grades["noop"].report["tests_status"]
        assert report["FAIL_TO_PASS"]["failure"] == json.loads(row["FAIL_TO_PASS"])
        assert report["PASS_TO_PASS"]["failure"] == []


def done_student(request: dict[str, Any]) -> Reply:
    """Looks once, then says it is done: a rollout that changes nothing."""
    turn = sum(m.get("role") == "assistant" for m in request.get("messages") or [])
    if turn == 0:
        return Reply(chat_completion("", [{"name": "bash", "arguments": {"command": "ls"}}], model="s"))
    return Reply(chat_completion("Nothing to fix.", model="s"))


@pytest.mark.docker
def test_collect_evaluate_resolves_what_the_fixing_teacher_does(client: Any, tmp_path: Path) -> None:
    from tests.collect_toy import NAMESPACE
    from tests.task_family import ensure_images

    rows = [instance(t) for t in SAMPLE[:2]]
    tag, _ = ensure_images(client, rows)
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    reports = {}
    for name, student in (("fixing", FixingTeacher()), ("done", done_student)):
        with LLMServer(student) as server:
            out = tmp_path / name
            argv = [sys.executable, "-m", "collect.run", "--instances", str(tmp_path / "rows.jsonl"),
                    "--student-url", server.url, "--student-model", "m", "--out", str(out), "--namespace",
                    NAMESPACE, "--image-tag", tag, "--evaluate", "--max-turns", "6", "-q"]
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-2000:]
            reports[name] = json.loads((out / "report.json").read_text())
    assert (reports["fixing"]["evaluated"], reports["fixing"]["resolved"]) == (2, 2), reports["fixing"]
    assert (reports["done"]["evaluated"], reports["done"]["resolved"]) == (2, 0), reports["done"]
