"""`python -m replay.verify` where no container is needed: the margin, the rows, the plan and dry run over
rollouts written by the real agent loop against a scripted workspace, and Claude Code sessions (no
environment), which are unverifiable, never an error. The branches themselves: tests/test_verify_docker.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replay.run import build_parser
from replay.run import main as replay_main
from replay.verification.rows import PairCheck, annotate
from replay.verification.values import outcome_of, value_of
from replay.verify import main as verify_main
from tests.cli import pool, tagged
from tests.collect_toy import toy_instance
from tests.llm_server import LLMServer
from tests.verify_toy import teacher, write_rollout

MEDIUM = "fe869ecb-c176-478f-9734-7e4b8ef12cff"  # 34 states


@pytest.mark.parametrize("chosen, rejected, outcome", [
    ([1, 1], [0, 0], "verified"),                  # the smallest N that can verify anything
    ([0, 0], [1, 1], "flipped"),
    ([1], [0], "tied"),                            # one sample each never decides
    ([1, 1, 1, 0], [0, 0, 0, 0], "verified"),
    ([1, 1, 1, 0], [1, 0, 0, 0], "tied"),
    ([1, 1, 1, 1], [1, 0, 0, 0], "verified"),
    ([1, 1], [1, 1], "tied"),
    ([0, 0, 0, 0], [0, 0, 0, 0], "tied"),
    ([1, None], [0, 0], "tied"),                   # a sample not graded is no sample
    ([None, None], [0, 0], "unverifiable"),
])
def test_the_margin(chosen: list[Any], rejected: list[Any], outcome: str) -> None:
    assert outcome_of(value_of(chosen, len(chosen)), value_of(rejected, len(rejected)))[0] == outcome


def check(outcome: str, chosen: float, rejected: float) -> PairCheck:
    good, bad = value_of([chosen] * 2, 2), value_of([rejected] * 2, 2)
    assert outcome_of(good, bad)[0] == outcome
    return PairCheck(state_id="s", outcome=outcome, chosen=good, rejected=bad,
                     difference=outcome_of(good, bad)[1])


@pytest.mark.parametrize("outcome, failed, labels", [
    ("verified", False, [("consensus", True, True), ("student", False, True)]),   # the student's row added
    ("verified", True, [("consensus", True, True), ("student", False, True)]),
    ("flipped", True, [("consensus", False, True), ("student", True, True)]),
    ("tied", True, [("consensus", True, False), ("student", False, False)]),      # the teachers' labels
    ("tied", False, [("consensus", True, False)]),
])
def test_kto_labels_follow_the_values(outcome: str, failed: bool,
                                      labels: list[tuple[str, bool, bool]]) -> None:
    base = {"state_id": "s", "prompt": [], "tools": [], "verdict": "pair"}
    rows = [{**base, "completion": [{"role": "assistant", "content": "c"}], "label": True,
             "completion_from": "consensus"}]
    if failed:
        rows.append({**base, "completion": [{"role": "assistant", "content": "x"}], "label": False,
                     "completion_from": "student"})
    values = {"verified": (1.0, 0.0), "flipped": (0.0, 1.0), "tied": (1.0, 1.0)}[outcome]
    out = annotate(rows, {"s": check(outcome, *values)}, "kto", {"s": {"role": "assistant", "content": "x"}})
    assert [(row["completion_from"], row["label"], row["verified"]) for row in out] == labels
    assert all(row["completion"] for row in out) and {row["flipped"] for row in out} == {outcome == "flipped"}


def test_dpo_rows_are_flagged_never_swapped() -> None:
    row = {"state_id": "s", "chosen": ["c"], "rejected": ["r"]}
    [out] = annotate([row], {"s": check("flipped", 0.0, 1.0)}, "dpo", {})
    assert (out["chosen"], out["rejected"], out["verified"], out["flipped"]) == (["c"], ["r"], False, True)
    assert out["verification"]["difference"][1] < 0
    [other] = annotate([{**row, "state_id": "t"}], {}, "dpo", {})
    assert (other["value_chosen"], other["verification"]) == (None, {"outcome": "not_a_pair"})


@pytest.fixture
def rollouts(tmp_path: Path) -> tuple[Path, Path]:
    """Three rollouts (the docker test's scripts), written by the agent loop, and their instances file."""
    folder = tmp_path / "rollouts"
    folder.mkdir()
    cases = {"toy__calc-71": "va", "toy__calc-72": "vb", "toy__calc-73": "vc"}
    for instance_id, script in cases.items():
        write_rollout(folder, instance_id, script)
    instances = tmp_path / "instances.jsonl"
    instances.write_text("".join(json.dumps(toy_instance(i, s)) + "\n" for i, s in cases.items()))
    return folder, instances


def test_the_dry_run_says_what_it_will_take_and_starts_nothing(
        tmp_path: Path, rollouts: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    folder, instances = rollouts
    out = tmp_path / "run"
    with LLMServer(teacher) as server:
        assert replay_main(["--source", str(folder), "--teachers", pool(server.url, "ta", "tb", "tc"),
                            "--out", str(out)]) == 0
    capsys.readouterr()
    args = ["--run", str(out), "--rollouts", str(folder), "--instances", str(instances), "--samples", "3"]
    assert verify_main([*args, "--dry-run", "--max-turns", "4"]) == 0
    said = capsys.readouterr().out
    # 3 pairs x 2 actions x 3 samples; the student's tokens from the rollouts' own usage
    assert said.startswith("3 pairs: 3 to check, 18 branches (18 to run) over 3 rollouts, ~")
    low, high = (int(n.replace(",", "")) for n in said.split("~")[1].split(" student")[0:1] +
                 said.split("at most ")[1].split(")")[0:1])
    assert 0 < low < high
    assert not (out / "verify").exists()

    before = (out / "pairs.jsonl").read_bytes()        # the rollouts' student is at 127.0.0.1:9: nobody
    assert verify_main(args) == 2
    error = capsys.readouterr().err
    assert "cannot reach the student at http://127.0.0.1:9/v1" in error and error.count("\n") == 1
    assert not (out / "verify").exists() and (out / "pairs.jsonl").read_bytes() == before

    (folder / "toy__calc-72.rollout.jsonl").unlink()
    instances.write_text(instances.read_text().splitlines()[0] + "\n")     # toy__calc-71's row only
    assert verify_main([*args, "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("3 pairs: 1 to check, 6 branches (6 to run) over 1 rollouts")

    assert verify_main(["--run", str(out), "--rollouts", str(folder), "--dry-run"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --instances FILE is needed") and error.count("\n") == 1


def test_session_states_are_unverifiable_never_an_error(fixtures_root: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    session = next(fixtures_root.rglob(f"{MEDIUM}.jsonl"))
    out, empty = tmp_path / "run", tmp_path / "rollouts"
    empty.mkdir()
    with LLMServer(tagged) as server:
        assert replay_main(["--source", str(session), "--teachers", pool(server.url, "ta", "tb", "tc"),
                            "--out", str(out)]) == 0
    pairs = json.loads((out / "report.json").read_text())["pairs"]
    run_columns = (out / "pairs.jsonl").read_text().splitlines()[0]
    assert pairs > 0 and '"verified"' not in run_columns     # replay.run's own rows are as they were
    capsys.readouterr()

    assert verify_main(["--run", str(out), "--rollouts", str(empty)]) == 0
    verify = json.loads((out / "report.json").read_text())["verify"]
    assert {k: verify[k] for k in ("pairs", "verified", "flipped", "tied", "unverifiable", "rollouts",
                                   "student_tokens", "restore_mismatches")} == {
        "pairs": pairs, "verified": 0, "flipped": 0, "tied": 0, "unverifiable": pairs, "rollouts": 0,
        "student_tokens": 0, "restore_mismatches": 0}
    assert verify["unverifiable_reasons"] == {"no_environment": pairs}
    rows = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    assert len(rows) == pairs and {row["verification"]["reason"] for row in rows} == {"no_environment"}
    from datasets import load_from_disk

    assert load_from_disk(str(out / "dataset")).num_rows == pairs
    assert "unverifiable" in (out / "README.md").read_text()

    assert verify_main(["--run", str(out), "--rollouts", str(empty), "--verified-only"]) == 0
    assert (out / "pairs.jsonl").read_text() == "" and load_from_disk(str(out / "dataset")).num_rows == 0
    assert verify_main(["--run", str(out), "--rollouts", str(empty)]) == 0       # the run's rows come back
    assert len((out / "pairs.jsonl").read_text().splitlines()) == pairs

    # the user's own command is unchanged
    args = build_parser().parse_args(["--source", "~/.claude/projects", "--teachers", "gpt-5,deepseek"])
    assert (args.teachers, args.out) == ("gpt-5,deepseek", Path("replay-out"))


def test_a_folder_that_is_no_run_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert verify_main(["--run", str(tmp_path), "--rollouts", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --run ") and "not the --out folder of a replay.run" in error


@pytest.mark.parametrize(("summary", "empty"), [
    ({"exit_status": {"context_overflow": 3}, "turns": 0}, True),       # #47 item 5: nothing was done
    ({"exit_status": {"context_overflow": 1, "submitted": 2}, "turns": 7}, False),
    ({"exit_status": {}, "turns": 0}, False),                          # no branch ran (all unverifiable)
    ({"exit_status": {"max_turns": 4}, "turns": 0}, False),            # --max-turns 0: no turn was due
    ({"exit_status": {"submitted": 2}, "turns": 0}, False),            # the actions themselves submitted
    ({"exit_status": {"context_overflow": 1, "submitted": 1}, "turns": 0}, True),
    ({"dry_run": True, "turns": 0}, False),
])
def test_a_verify_in_which_no_branch_took_a_turn_is_empty(summary: dict, empty: bool) -> None:
    from replay.verify import _describe, _empty

    assert _empty(summary) == empty
    if not summary.get("dry_run"):
        line = _describe({"pairs": 1, "verified": 0, "flipped": 0, "tied": 0, "unverifiable": 1,
                          "restore_mismatches": 0, "rollouts": 1, "student_tokens": 0, "usd": 0.0, "rows": 1,
                          "branches": {"run": 3, "resumed": 0, "failed": {}}, **summary})
        assert ("NO TURNS" in line) == empty
        assert all(f"{n} {kind}" in line for kind, n in summary["exit_status"].items())
