"""replay.ablation: pools, per-state exclusion, counts, kappa, outputs."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from ingestion.schema import Action, Proposal, ToolCall, TraceState
from replay.ablation.agreement import agreement_matrix, cohen_kappa
from replay.ablation.evaluate import evaluate_pool, jaccard, method_decider
from replay.ablation.load import missing_answers
from replay.ablation.outputs import csv_text, write_plot
from replay.ablation.pools import (
    AblationError,
    all_subsets,
    leave_one_out,
    pool_dirname,
    split_pools,
    unique_pools,
)
from replay.ablation.result import Ablation
from teachers.registry import TeacherSpec


def bash(command: str) -> Action:
    return Action(tool_calls=[ToolCall(id="c", name="Bash", arguments={"command": command})])


def state(i: int, student: str | None, action: str = "ls") -> TraceState:
    return TraceState(state_id=f"s{i}", trace_id="t", turn=i, source="claude_code",
                      student_action=bash(action), messages=[{"role": "user", "content": f"task {i}"}],
                      student_model=student, metadata={"cwd": "/repo"})


def answer(i: int, teacher: str, command: str | None, usd: float = 0.01) -> Proposal:
    return Proposal(state_id=f"s{i}", teacher=teacher, model=teacher, sample=0,
                    action=bash(command) if command else None, error=None if command else "invalid",
                    cost_usd=usd)


GPT = TeacherSpec(name="gpt", model="openai/gpt-5", family="openai")
QWEN = TeacherSpec(name="qwen", model="openrouter/qwen/qwen3-coder", family="qwen")
OPUS = TeacherSpec(name="opus", model="anthropic/claude-opus-4-6", family="anthropic")


@pytest.mark.parametrize(("teachers", "expected"), [
    (["gpt-5", "deepseek"], "gpt-5+deepseek"),
    (["a"], "a"),
    (["openrouter/qwen/qwen3-coder"], "openrouter_qwen_qwen3-coder-ef13f0"),
    ([".."], "pool-" + __import__("hashlib").sha256(b"..").hexdigest()[:6]),
])
def test_pool_dirname(teachers: list[str], expected: str) -> None:
    assert pool_dirname(teachers) == expected


def test_pool_dirnames_never_collide() -> None:
    assert pool_dirname(["a/b"]) != pool_dirname(["a_b"]) and "/" not in pool_dirname(["a/b"])
    assert len(pool_dirname(["x" * 200, "y" * 200])) < 140


@pytest.mark.parametrize(("text", "expected"), [
    ("gpt-5,deepseek;gpt-5;deepseek", [["gpt-5", "deepseek"], ["gpt-5"], ["deepseek"]]),
    (" a , b ;; ", [["a", "b"]]),
    ("x=openai/m@http://127.0.0.1:8000/v1,a", [["x=openai/m@http://127.0.0.1:8000/v1", "a"]]),
    (";", []),
])
def test_split_pools(text: str, expected: list[list[str]]) -> None:
    assert split_pools(text) == expected


def test_subsets_and_leave_one_out() -> None:
    subsets = all_subsets(["a", "b", "c", "d"])
    assert len(subsets) == 15 == len(set(subsets)) and subsets[0] == ("a", "b", "c", "d")
    assert [len(s) for s in subsets] == sorted((len(s) for s in subsets), reverse=True)
    assert leave_one_out(["a", "b"]) == [("a", "b"), ("b",), ("a",)]
    assert leave_one_out(["a"]) == [("a",)]
    with pytest.raises(AblationError, match="at most 8"):
        all_subsets([str(i) for i in range(9)])


def test_unique_pools_puts_the_full_pool_first_once() -> None:
    assert unique_pools(["a", "b", "c"], [["c", "a"], ["a", "c"], ["b", "a", "c"], ["new", "b"]]) == [
        ("a", "b", "c"), ("a", "c"), ("b", "new")]


def test_exclusion_is_per_state_as_in_the_run() -> None:
    states = [state(0, "claude-opus-4-6"), state(1, "Qwen/Qwen3-Coder-30B-A3B-Instruct"), state(2, None)]
    answers = {"s0": [answer(0, "gpt", "pwd"), answer(0, "qwen", "pwd")],
               "s1": [answer(1, "gpt", "ls"), answer(1, "opus", "pwd")],
               "s2": [answer(2, "gpt", "ls"), answer(2, "qwen", "ls"), answer(2, "opus", "ls")]}
    decide = method_decider("vote", 0.5)
    full = evaluate_pool([GPT, QWEN, OPUS], states, answers, decide).counts
    assert full.excluded_same_family == {"opus": 1, "qwen": 1}
    assert (full.pairs, full.agree, full.abstained, full.all_teachers_excluded) == (1, 1, 1, 0)
    only_qwen = evaluate_pool([QWEN], states, answers, decide).counts
    assert only_qwen.all_teachers_excluded == 1 and only_qwen.voted == 2 and only_qwen.agree == 1
    allowed = evaluate_pool([QWEN], states, answers, decide, allow_same_family=True).counts
    assert allowed.all_teachers_excluded == 0 and allowed.unanswered == 1  # s1: qwen was never asked


def test_counts_rates_cost_and_pairs() -> None:
    states = [state(i, "claude-sonnet-4-5") for i in range(4)]
    answers = {"s0": [answer(0, "gpt", "pwd"), answer(0, "qwen", "pwd")],      # pair
               "s1": [answer(1, "gpt", "ls"), answer(1, "qwen", "ls")],        # agree
               "s2": [answer(2, "gpt", "pwd"), answer(2, "qwen", "cat x")],    # tie: abstain
               "s3": [answer(3, "gpt", None), answer(3, "qwen", None)]}        # no votes: abstain
    result = evaluate_pool([GPT, QWEN], states, answers, method_decider("vote", 0.5))
    counts = result.counts
    assert (counts.voted, counts.reached, counts.abstained, counts.agree, counts.pairs) == (4, 2, 2, 1, 1)
    assert (counts.consensus_rate, counts.abstain_rate, counts.agree_rate) == (0.5, 0.5, 0.5)
    assert counts.cost_usd == pytest.approx(0.08) and result.pair_ids == {"s0"}
    assert [row["state_id"] for row in result.rows] == ["s0"]
    assert result.rows[0]["teachers"] == ["gpt", "qwen"]


def test_missing_answers_skip_excluded_teachers() -> None:
    states = [state(0, "claude-opus-4-6"), state(1, "claude-opus-4-6")]
    answers = {"s0": [answer(0, "gpt", "ls")]}
    gaps = missing_answers(states, answers, [GPT, QWEN, OPUS], samples=1, allow_same_family=False)
    assert [(i, t.name, k) for i, t, k in gaps] == [(0, "qwen", 0), (1, "gpt", 0), (1, "qwen", 0)]


@pytest.mark.parametrize(("a", "b", "expected"), [
    ({"s1", "s2"}, {"s1", "s2"}, 1.0), ({"s1"}, {"s2"}, 0.0), (set(), set(), 1.0),
    ({"s1", "s2"}, {"s2"}, 0.5)])
def test_jaccard(a: set[str], b: set[str], expected: float) -> None:
    assert jaccard(frozenset(a), frozenset(b)) == expected


@pytest.mark.parametrize(("pairs", "expected"), [
    # The textbook example: 50 items, 20 yes/yes, 15 no/no, 5 yes/no, 10 no/yes -> kappa 0.4.
    ([("y", "y")] * 20 + [("n", "n")] * 15 + [("y", "n")] * 5 + [("n", "y")] * 10, 0.4),
    ([("a", "b"), ("b", "a")], -1.0),
    ([("a", "a"), ("a", "a")], None),
])
def test_cohen_kappa(pairs: list[tuple[str, str]], expected: float | None) -> None:
    assert cohen_kappa(pairs) == expected


def test_agreement_is_over_states_both_answered_and_canonical() -> None:
    states = [state(i, None) for i in range(3)]
    answers = {"s0": [answer(0, "gpt", "ls  -la"), answer(0, "qwen", "cd /repo && ls -la")],  # equivalent
               "s1": [answer(1, "gpt", "pwd"), answer(1, "qwen", None)],                     # qwen failed
               "s2": [answer(2, "gpt", "pwd"), answer(2, "qwen", "ls")]}
    matrix = agreement_matrix(states, answers, ["gpt", "qwen"])
    cell = matrix.cells[0][1]
    assert (cell.states, cell.agree, cell.raw) == (2, 1, 0.5)
    assert matrix.cells[1][0].model_dump(exclude={"a", "b"}) == cell.model_dump(exclude={"a", "b"})
    assert (matrix.cells[0][0].states, matrix.cells[0][0].raw, matrix.cells[1][1].states) == (3, 1.0, 2)


def test_csv_and_plot_outputs(tmp_path: Path) -> None:
    states = [state(i, "claude-sonnet-4-5") for i in range(3)]
    answers = {f"s{i}": [answer(i, "gpt", "pwd"), answer(i, "qwen", "pwd" if i else "ls")] for i in range(3)}
    decide = method_decider("vote", 0.5)
    rows = [evaluate_pool(pool, states, answers, decide).counts for pool in ([GPT, QWEN], [GPT], [QWEN])]
    text = csv_text(rows, ["gpt+qwen", "gpt", "qwen"])
    table = list(csv.DictReader(io.StringIO(text)))
    assert [r["pool"] for r in table] == ["gpt+qwen", "gpt", "qwen"] and table[1]["dataset"] == "gpt/dataset"
    ablation = Ablation(run=tmp_path, out=tmp_path, method="vote", rows=rows,
                        dirs=["gpt+qwen", "gpt", "qwen"],
                        agreement=agreement_matrix(states, answers, ["gpt", "qwen"]))
    write_plot(ablation, tmp_path / "ablation.png")
    assert (tmp_path / "ablation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tier_split_and_agreement_at_both_tiers(tmp_path: Path) -> None:
    from replay.ablation.outputs import agreement_csv_text, markdown_text

    states = [state(i, "claude-sonnet-4-5", "ls") for i in range(3)]
    answers = {"s0": [answer(0, "gpt", "ls -la"), answer(0, "qwen", "ls  -la")],       # exact: agree
               "s1": [answer(1, "gpt", "cat a.py"), answer(1, "qwen", "head a.py")],    # intent: pair
               "s2": [answer(2, "gpt", "ls -F"), answer(2, "qwen", "tree")]}            # intent: agree
    tiers = evaluate_pool([GPT, QWEN], states, answers, method_decider("vote", 0.5)).counts
    assert (tiers.reached_exact, tiers.reached_intent, tiers.agree, tiers.pairs) == (1, 2, 2, 1)
    exact = evaluate_pool([GPT, QWEN], states, answers, method_decider("vote", 0.5, "exact"), match="exact")
    assert (exact.counts.reached_exact, exact.counts.reached_intent, exact.counts.abstained) == (1, 0, 2)
    assert exact.counts.pairs == 1  # s0: `ls -la` is not the student's `ls` at the exact tier
    assert [row["match"] for row in exact.rows] == ["exact"]
    by_exact = agreement_matrix(states, answers, ["gpt", "qwen"])
    by_intent = agreement_matrix(states, answers, ["gpt", "qwen"], "intent")
    assert (by_exact.cells[0][1].agree, by_intent.cells[0][1].agree, by_intent.tier) == (1, 3, "intent")
    lines = agreement_csv_text(by_exact, by_intent).splitlines()
    assert lines[0].endswith("agree_intent,raw_intent,kappa_intent") and lines[2].startswith("gpt,qwen,3,1,")
    ablation = Ablation(run=tmp_path, out=tmp_path, method="vote", rows=[tiers], dirs=["gpt+qwen"],
                        agreement=by_exact, agreement_intent=by_intent)
    text = markdown_text(ablation)
    assert "| 1 / 2 |" in text and "## Teacher agreement at the intent tier" in text
