"""Shapley shares, Dawid–Skene reliability, the weighted vote and hindsight, as pure functions."""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations

import pytest

from consensus.reliability import dawid_skene, pattern
from consensus.result import ConsensusResult
from consensus.vote import vote
from consensus.weighted import weighted
from ingestion.schema import Action, Proposal, ToolCall
from replay.ablation.shapley import exact_shapley, leave_one_out, sampled_shapley, shapley
from replay.ablation.teachers import Point, asking_order, recommend
from replay.decide.hindsight import Hindsight, hindsight_tier

SIX = ["a", "b", "c", "d", "e", "f"]
ACCURACY = {"a": 0.9, "b": 0.85, "c": 0.8, "d": 0.7, "e": 0.5, "f": 0.3}


def _items(n: int = 300, seed: int = 1) -> list[dict[str, str]]:
    """Each teacher gives the state's true key with its accuracy, else a key of its own."""
    rng = random.Random(seed)
    return [{t: "true" if rng.random() < p else f"{t}-{i}-{rng.randrange(2)}" for t, p in ACCURACY.items()}
            for i in range(n)]


def _majority_game(items: list[dict[str, str]]):
    """v(S): the states where S's strict majority names the true key (a vote's hits)."""
    def value(pool: frozenset[str]) -> float:
        hits = 0
        for item in items:
            counts = Counter(item[t] for t in pool)
            key, top = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
            hits += key == "true" and 2 * top > len(pool)
        return float(hits)

    return value


def test_exact_shares_add_up_to_the_full_pool() -> None:
    value = _majority_game(_items())
    shares = exact_shapley(SIX, value)
    assert sum(s.value for s in shares) == pytest.approx(value(frozenset(SIX)))
    by = {s.teacher: s.value for s in shares}
    assert by["a"] > by["d"] > by["f"]  # the more accurate, the larger the share


def test_sampled_agrees_with_exact_within_its_error_on_six_teachers() -> None:
    value = _majority_game(_items())
    exact = {s.teacher: s.value for s in exact_shapley(SIX, value)}
    sampled = sampled_shapley(SIX, value, permutations=400, seed=7)
    assert sum(s.value for s in sampled) == pytest.approx(value(frozenset(SIX)))  # efficient too
    for share in sampled:
        assert share.stderr > 0
        assert abs(share.value - exact[share.teacher]) <= 3 * share.stderr, share
    within_one = sum(abs(s.value - exact[s.teacher]) <= s.stderr for s in sampled)
    assert within_one >= 3  # about 68% of them within one standard error
    assert shapley(SIX, value, exact_max=5)[0].stderr > 0  # beyond the cut-off: sampled


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_efficiency_on_random_games(n: int) -> None:
    rng = random.Random(n)
    players = SIX[:n]
    table = {frozenset(c): rng.uniform(-1, 5) for k in range(1, n + 1) for c in combinations(players, k)}
    shares = exact_shapley(players, table.__getitem__)
    assert sum(s.value for s in shares) == pytest.approx(table[frozenset(players)])
    loo = leave_one_out(players, table.__getitem__)
    assert set(loo) == set(players)


def test_dawid_skene_ranks_teachers_by_accuracy() -> None:
    items = _items(400)
    families = ["Bash" if i % 2 else "Edit" for i in range(len(items))]
    r = dawid_skene(items, families)
    ranked = sorted(r.teachers, key=r.teachers.__getitem__, reverse=True)
    assert ranked == ["a", "b", "c", "d", "e", "f"]
    assert abs(r.teachers["a"] - 0.9) < 0.05 and abs(r.teachers["f"] - 0.3) < 0.07
    assert set(r.families) == {"Bash", "Edit"} and r.family_answers["Bash"]["a"] == 200
    assert dawid_skene(items, families, min_family=300).families == {}
    assert dawid_skene(list(reversed(items))).teachers == dawid_skene(items).teachers  # order-free


def test_pattern_is_all_the_model_sees() -> None:
    assert pattern({"a": "x", "b": "y", "c": "x"}) == pattern({"c": "q", "a": "q", "b": "z"})


def _bash(teacher: str, command: str, sample: int = 0) -> Proposal:
    call = ToolCall(id=teacher, name="Bash", arguments={"command": command})
    return Proposal(state_id="s", teacher=teacher, model=teacher, sample=sample,
                    action=Action(tool_calls=[call]))


def test_weighted_with_equal_weights_is_the_vote() -> None:
    rng = random.Random(3)
    commands = ["ls", "ls -la", "pwd", "cat a.py", "git status"]
    for _ in range(200):
        proposals = [_bash(t, rng.choice(commands)) for t in "abcde"[:rng.randint(1, 5)]]
        for match in ("exact", "intent"):
            a, b = vote(proposals, match=match), weighted(proposals, {}, match=match)
            assert (a.reached, a.reason, a.canonical, a.match, a.winner_teachers) == \
                   (b.reached, b.reason, b.canonical, b.match, b.winner_teachers)


@pytest.mark.parametrize(("weights", "min_agreement", "winner", "reason"), [
    ({"a": 0.9, "b": 0.5, "c": 0.5}, 0.5, None, "no_majority"),    # 0.9 of 1.9: not more than half
    ({"a": 0.9, "b": 0.3, "c": 0.3}, 0.5, ["a"], None),             # 0.9 of 1.5: more than half
    ({"a": 0.9, "b": 0.3, "c": 0.3}, 0.6, None, "no_majority"),     # 0.6 of the weight is asked
    ({"a": 0.2, "b": 0.9, "c": 0.9}, 0.5, None, "tie"),             # b and c weigh the same
])
def test_weighted_thresholds(weights: dict[str, float], min_agreement: float, winner: list[str] | None,
                             reason: str | None) -> None:
    result = weighted([_bash("a", "ls"), _bash("b", "pwd"), _bash("c", "git status")], weights,
                      min_agreement=min_agreement)
    assert result.reason == reason
    assert (result.winner_teachers if result.reached else None) == winner


@pytest.mark.parametrize(("consensus", "recovery", "tier"), [
    ("cat src/mod.py", "cat src/mod.py", "exact"),
    ("cat src/mod.py", "cat  src/mod.py", "exact"),       # the same canonical action
    ("cat missing.py", "cat src/mod.py", None),           # the teachers repeat the failed call
    ("git status", "git status --short", "intent"),       # the same intent, written differently
])
def test_hindsight_tiers(consensus: str, recovery: str, tier: str | None) -> None:
    proposal = _bash("a", consensus)
    result = ConsensusResult(method="vote", reached=True, action=proposal.action, match="exact")
    assert hindsight_tier(result, _bash("s", recovery).action) == tier  # type: ignore[arg-type]
    h = Hindsight()
    h.add(True, True, True, tier)
    assert h.intent_rate == (1.0 if tier else 0.0)


def test_recommend_and_asking_order() -> None:
    points = [Point(pool="x", size=1, cost_usd=1.0, pairs=10, hindsight=None),
              Point(pool="y", size=1, cost_usd=0.5, pairs=9, hindsight=None)]
    assert recommend(points, 0.05) is not None and recommend(points, 0.05)[0].pool == "x"
    assert recommend(points, 0.15)[0].pool == "y"  # type: ignore[index]
    items = [{"a": "k", "b": "k", "c": "j"}] * 3
    asked, cost = [["a", "b", "c"]] * 3, {"a": 3.0, "b": 2.0, "c": 1.0}
    cheap = asking_order("cheap", ["c", "a", "b"], items, asked, cost, 0.5)
    reliable = asking_order("rel", ["a", "b", "c"], items, asked, cost, 0.5)
    assert (cheap.calls, reliable.calls) == (9, 6) and reliable.usd_saved == 3.0
