"""`python -m replay.verify` end to end on a real docker engine (`pytest -m docker`).

Toy instances built as the collect tests build them (tests/collect_toy.py), rollouts collected by
`collect.run` with a scripted student (tests/verify_toy.py) behind the vLLM-shaped server, pairs made by
`replay.run` with scripted teachers on loopback, then each pair branched, continued by the same student
and graded by the swebench harness.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collect.runtime import LABEL, containers
from tests.collect_toy import NAMESPACE, ensure_instance_images, toy_instance
from tests.llm_server import LLMServer
from tests.verify_toy import EXPECTED, student_policy, teacher
from tests.vllm_server import VLLMServer

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[1]
CASES = {"toy__calc-71": "va", "toy__calc-72": "vb", "toy__calc-73": "vc"}
TEACHERS = ("ta", "tb", "tc")


class Toy:
    """Rollouts collected and a replay.run made of them, with the student still served."""

    def __init__(self, folder: Path, student_url: str, teachers_url: str, image_tag: str) -> None:
        self.folder, self.student_url, self.teachers_url = folder, student_url, teachers_url
        self.image_tag = image_tag
        self.rollouts, self.instances = folder / "rollouts", folder / "instances.jsonl"

    def run(self, out: Path, *extra: str) -> Path:
        from replay.run import main as replay_main

        pool = ",".join(f"{name}=openai/{name}@{self.teachers_url}" for name in TEACHERS)
        args = ["--source", str(self.rollouts), "--teachers", pool, "--out", str(out), *extra]
        assert replay_main(args) == 0
        return out


@pytest.fixture(scope="module")
def toy(client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toy]:
    image_tag = ensure_instance_images(client, list(CASES))
    folder = tmp_path_factory.mktemp("verify")
    with VLLMServer(student_policy()) as student, LLMServer(teacher) as teachers:
        made = Toy(folder, student.url, teachers.url, image_tag)
        rows = [toy_instance(instance_id, script) for instance_id, script in CASES.items()]
        made.instances.write_text("".join(json.dumps(row) + "\n" for row in rows))
        done = subprocess.run([sys.executable, "-m", "collect.run", "--instances", str(made.instances),
                               "--student-url", student.url, "--student-model", "student", "--out",
                               str(made.rollouts), "--namespace", NAMESPACE, "--image-tag", image_tag,
                               "--evaluate", "--workers", "2", "--max-turns", "8", "--temperature", "0.5"],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        yield made


def leftovers(client: Any, ids: Any = CASES) -> list[str]:
    """Containers of this file's verifications (labelled by a verify run) or of its instances: the engine
    is shared with other tests that may be running."""
    ours = [c.name for c in containers(client, {"label": LABEL})
            if c.labels.get(LABEL, "").startswith("verify-")]
    return ours + [c.name for c in containers(client) if any(f".{i}." in c.name for i in ids)]


def verify(run: Path, toy: Toy, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replay.verify", "--run", str(run), "--rollouts",
                           str(toy.rollouts), "--instances", str(toy.instances), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)


def rows(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "pairs.jsonl").read_text().splitlines()]


def by_instance(values: list[dict[str, Any]]) -> dict[str, str]:
    return {next(i for i in CASES if f":{i}." in value["state_id"]): value["outcome"] for value in values}


def shows_each_branch(run: Path, tmp_path: Path) -> None:
    """The view's page of a checked state draws its outcome and a row per branch (the pages in Chromium
    where it is installed, the data they draw from in any case)."""
    from replay.view.cli import main as view_main
    from tests.test_view import dump_dom, records, state_url

    assert view_main([str(run)]) == 0
    checked = {n: r for n, r in records(run / "view").items() if r.get("verify")}
    assert sorted(r["verify"]["outcome"] for r in checked.values()) == ["flipped", "tied", "verified"]
    number = next(n for n, r in checked.items() if r["verify"]["outcome"] == "flipped")
    assert [b[:3] for b in checked[number]["verify"]["branches"]] == [
        ["chosen", 0, 0.0], ["chosen", 1, 0.0], ["rejected", 0, 1.0], ["rejected", 1, 1.0]]
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        return
    page = dump_dom(state_url(run, number), tmp_path / "profile")
    assert "Checked by the environment" in page and page.count("<td>submitted</td>") == 4
    overview = dump_dom((run / "view/index.html").as_uri(), tmp_path / "profile")
    assert re.search(r'id="verify".*verified <b>1</b> · flipped <b>1</b> · tied <b>1</b>', overview, re.S)


def test_each_pair_comes_out_as_scripted(tmp_path: Path, client: Any, toy: Toy) -> None:
    run = toy.run(tmp_path / "run")
    assert len(rows(run)) == 3                     # one pair per rollout, at turn 1

    dry = verify(run, toy, "--samples", "2", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("3 pairs: 3 to check, 12 branches (12 to run) over 3 rollouts, ~")
    assert not (run / "verify").exists() and leftovers(client) == []

    done = verify(run, toy, "--samples", "2")
    assert done.returncode == 0, done.stderr
    report = json.loads((run / "report.json").read_text())["verify"]
    assert {key: report[key] for key in ("pairs", "verified", "flipped", "tied", "unverifiable",
                                         "restore_mismatches", "rollouts", "usd")} == {
        "pairs": 3, "verified": 1, "flipped": 1, "tied": 1, "unverifiable": 0, "restore_mismatches": 0,
        "rollouts": 3, "usd": 0.0}
    assert report["student_tokens"] > 0 and report["branches"] == {"run": 12, "resumed": 0, "failed": {}}
    values = [json.loads(line) for line in (run / "verify/values.jsonl").read_text().splitlines()]
    assert by_instance(values) == {i: EXPECTED[script] for i, script in CASES.items()}
    for value in values:            # one replay per state, the state's other branches from its snapshot
        restored = sorted((b["restored"], b["replayed"], b["mismatches"]) for b in value["branches"])
        assert restored == [("replay", 1, 0), ("snapshot", 0, 0), ("snapshot", 0, 0), ("snapshot", 0, 0)]
    assert not client.images.list(name="teacher-replay-verify/state")
    written = {i: row for row in rows(run) for i in CASES if f":{i}." in row["state_id"]}
    assert [(written[i]["value_chosen"], written[i]["value_rejected"], written[i]["verified"],
             written[i]["flipped"]) for i in CASES] == [(1.0, 0.0, True, False), (0.0, 1.0, False, True),
                                                        (1.0, 1.0, False, False)]
    from datasets import load_from_disk

    dataset = load_from_disk(str(run / "dataset"))
    assert dataset.column_names[-5:] == ["value_chosen", "value_rejected", "verified", "flipped",
                                         "verification"]
    assert "## Checked by the environment" in (run / "README.md").read_text()
    assert leftovers(client) == []
    shows_each_branch(run, tmp_path)

    again = verify(run, toy, "--samples", "2")          # resumable: no graded branch runs twice
    assert again.returncode == 0, again.stderr
    report = json.loads((run / "report.json").read_text())["verify"]
    assert report["branches"] == {"run": 0, "resumed": 12, "failed": {}} and report["verified"] == 1
    assert len((run / "verify/branches.jsonl").read_text().splitlines()) == 12

    kept = verify(run, toy, "--samples", "2", "--verified-only")
    assert kept.returncode == 0 and [row["verified"] for row in rows(run)] == [True]
    assert verify(run, toy, "--samples", "2").returncode == 0 and len(rows(run)) == 3   # nothing lost

    # KTO: the same branches (their keys do not depend on the run), labels following the values
    kto = toy.run(tmp_path / "kto", "--format", "kto")
    (kto / "verify").mkdir()
    shutil.copy(run / "verify/branches.jsonl", kto / "verify/branches.jsonl")
    assert verify(kto, toy, "--samples", "2").returncode == 0
    labels = sorted((i, row["completion_from"], row["label"]) for row in rows(kto) for i in CASES
                    if f":{i}." in row["state_id"] and row["verdict"] == "pair")
    assert labels == [("toy__calc-71", "consensus", True), ("toy__calc-71", "student", False),
                      ("toy__calc-72", "consensus", False), ("toy__calc-72", "student", True),
                      ("toy__calc-73", "consensus", True)]
    assert json.loads((kto / "report.json").read_text())["verify"]["branches"]["run"] == 0
    assert leftovers(client) == []


def test_an_interrupted_verification_keeps_what_it_graded_and_leaves_out_as_it_was(
        tmp_path: Path, client: Any, toy: Toy) -> None:
    import signal
    import time

    from tests.cli import snapshot

    run = toy.run(tmp_path / "run")
    before = snapshot(run)
    ledger = run / "verify/branches.jsonl"
    driver = subprocess.Popen([sys.executable, "-m", "replay.verify", "--run", str(run), "--rollouts",
                               str(toy.rollouts), "--instances", str(toy.instances), "--samples", "2"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while driver.poll() is None and time.monotonic() < deadline and (
            not ledger.is_file() or len(ledger.read_text().splitlines()) < 2):
        time.sleep(0.1)
    driver.send_signal(signal.SIGINT)
    _, stderr = driver.communicate(timeout=120)
    assert driver.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1].startswith("interrupted: every graded branch is kept in")
    assert {k: v for k, v in snapshot(run).items() if not k.startswith("verify/")} == before
    assert leftovers(client) == []
    graded = {line["key"] for line in map(json.loads, ledger.read_text().splitlines())
              if line["result"]["reward"] is not None}
    assert 2 <= len(graded) < 12

    assert verify(run, toy, "--samples", "2").returncode == 0
    report = json.loads((run / "report.json").read_text())["verify"]
    assert (report["branches"]["resumed"], report["branches"]["run"]) == (len(graded), 12 - len(graded))
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert sorted(line["key"] for line in lines if line["result"]["reward"] is not None) == sorted(
        {line["key"] for line in lines})                       # every branch graded once, none twice
    assert (report["verified"], report["flipped"], report["tied"]) == (1, 1, 1)
    assert leftovers(client) == []


def test_a_sweep_removes_only_the_containers_of_its_labels(client: Any) -> None:
    """The sweep a verification makes of what an earlier one of the same folder left: every container
    with its labels but the run's own, and none at all given no labels (an empty label filter matches
    every container on the engine)."""
    import secrets

    from collect.cluster import remove_labelled, sweep_on_node
    from collect.instances import image_name
    from collect.on_ray import LABEL_OUT

    tag = ensure_instance_images(client, list(CASES))
    folder = f"sweep-test-{secrets.token_hex(4)}"
    runs = [f"verify-sweep-{secrets.token_hex(3)}" for _ in range(2)]
    made = [client.containers.create(image_name(next(iter(CASES)), NAMESPACE, tag), ["true"],
                                     labels={LABEL: run, LABEL_OUT: folder}) for run in runs]

    def left() -> list[str]:
        found = containers(client, {"label": f"{LABEL_OUT}={folder}"})
        return [container.labels[LABEL] for container in found]

    try:
        assert remove_labelled(client, {}) == 0 and sweep_on_node({}) == 0 and sorted(left()) == sorted(runs)
        assert remove_labelled(client, {LABEL_OUT: folder}, keep_run=runs[0]) == 1 and left() == [runs[0]]
        assert remove_labelled(client, {LABEL_OUT: folder}) == 1 and left() == []
    finally:
        for container in made:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - removed by the test
                pass
