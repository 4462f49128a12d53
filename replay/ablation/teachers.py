"""Which teachers are worth paying for, from the answers a run already has. Pure.

- `vote_items`: per state, each teacher's intent key (`consensus.reliability.state_keys`), the input
  of `consensus.reliability.dawid_skene`.
- `frontier`: the pools no other pool beats on both cost and hindsight agreement (Pareto-optimal),
  and `recommend`, the cheapest pool within a margin of the best.
- `asking_orders`: `--early-stop` replayed from the cache in a given teacher order (cheapest first,
  most reliable first): the calls each order would have made and saved, and how often the stopped
  vote still decides as the full pool does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from consensus.early_stop import decided
from consensus.reliability import state_keys
from consensus.validity import screen
from ingestion.schema import Proposal, TraceState
from replay.ablation.evaluate import PoolCounts, pool_proposals
from teachers.registry import TeacherSpec


def vote_items(states: Sequence[TraceState], answers: Mapping[str, Sequence[Proposal]],
               teachers: Sequence[TeacherSpec], allow_same_family: bool, match: str = "intent"
               ) -> tuple[list[dict[str, str]], list[str]]:
    """Every state's `state_keys` over the pool's eligible, valid answers."""
    items, families = [], []
    for state in states:
        _, proposals = pool_proposals(teachers, state, answers, allow_same_family)
        keys, family = state_keys(state, screen(proposals, state.tools), match)
        items.append(keys)
        families.append(family)
    return items, families


class Point(BaseModel):
    pool: str
    size: int
    cost_usd: float
    pairs: int
    hindsight: float | None      # intent-tier hindsight agreement
    pareto: bool = False
    student: float | None = None               # --train: the trained student's accuracy (recovery set)
    student_gain_per_usd: float | None = None  # ... its gain over the untrained student per USD


def frontier(rows: Sequence[PoolCounts]) -> list[Point]:
    """Every pool as a point (cost, hindsight agreement), Pareto-optimal ones marked: no other pool
    costs no more and agrees at least as well, one of the two strictly. Without hindsight figures
    (no failed state with a recovery) pairs stand in for it.

    >>> mk = lambda p, c, n, h: PoolCounts(pool=p, teachers=p.split("+"), cost_usd=c, pairs=n,
    ...     hindsight={"failed": 10, "states": 10, "intent": h})
    >>> [(p.pool, p.pareto) for p in frontier([mk("a+b", 2.0, 5, 9), mk("a", 1.0, 4, 9), mk("b", 0.5, 3, 6)])]
    [('a+b', False), ('a', True), ('b', True)]
    """
    points = [Point(pool=r.pool, size=len(r.teachers), cost_usd=r.cost_usd, pairs=r.pairs,
                    hindsight=r.hindsight.intent_rate) for r in rows]
    use_pairs = all(p.hindsight is None for p in points)

    def score(p: Point) -> float:
        return float(p.pairs) if use_pairs else (p.hindsight or 0.0)

    for p in points:
        p.pareto = not any(q is not p and q.cost_usd <= p.cost_usd and score(q) >= score(p)
                           and (q.cost_usd < p.cost_usd or score(q) > score(p)) for q in points)
    return points


def recommend(points: Sequence[Point], margin: float) -> tuple[Point, str] | None:
    """The cheapest pool whose hindsight agreement is within `margin` (absolute, 0.02 = 2 points) of
    the best pool's; fewer teachers, then more pairs break ties. Without hindsight figures: within
    `margin` (relative) of the most pairs. Returns (the pool, why).

    >>> pts = [Point(pool="a+b", size=2, cost_usd=2, pairs=5, hindsight=0.9),
    ...        Point(pool="a", size=1, cost_usd=1, pairs=4, hindsight=0.89), Point(pool="b", size=1,
    ...        cost_usd=0.5, pairs=3, hindsight=0.6)]
    >>> recommend(pts, 0.02)[0].pool
    'a'
    """
    if not points:
        return None
    if any(p.hindsight is not None for p in points):
        best = max(p.hindsight or 0.0 for p in points)
        ok = [p for p in points if (p.hindsight or 0.0) >= best - margin - 1e-12]
        why = (f"hindsight agreement (intent) {100 * best:.1f}% at best; pools within {100 * margin:.1f} "
               f"points of it, the cheapest")
    else:
        best = max(p.pairs for p in points)
        ok = [p for p in points if p.pairs >= (1 - margin) * best - 1e-12]
        why = (f"no hindsight figures: pairs {best} at best; pools within {100 * margin:.0f}% of it, "
               "the cheapest")
    return min(ok, key=lambda p: (p.cost_usd, p.size, -p.pairs, p.pool)), why


class AskingOrder(BaseModel):
    name: str
    order: list[str]
    states: int = 0
    calls: int = 0
    calls_saved: int = 0
    usd: float = 0.0
    usd_saved: float = 0.0
    same_outcome: int = 0   # states where the stopped vote decided as the full pool (same key or both none)


def _outcome(keys: Sequence[str | None], min_agreement: float) -> str | None:
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return None
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
        return None
    return ranked[0][0] if ranked[0][1] / sum(counts.values()) > min_agreement else None


def asking_order(name: str, order: Sequence[str], items: Sequence[Mapping[str, str]],
                 asked: Sequence[Sequence[str]], cost: Mapping[str, float], min_agreement: float
                 ) -> AskingOrder:
    """Early stop replayed: at each state ask `order`'s teachers (those that were asked there,
    `asked[i]`) one at a time until `consensus.early_stop.decided`; an unanswered ask is no vote.

    >>> items = [{"a": "x", "b": "x", "c": "y"}, {"a": "x", "b": "z", "c": "z"}]
    >>> r = asking_order("t", ["a", "b", "c"], items, [["a", "b", "c"]] * 2, {"a": 1, "b": 1, "c": 1}, 0.5)
    >>> r.calls, r.calls_saved, r.same_outcome
    (5, 1, 2)
    """
    result = AskingOrder(name=name, order=list(order), states=len(items))
    for keys, present in zip(items, asked, strict=True):
        ordered = [t for t in order if t in present]
        votes: list[str | None] = []
        for number, teacher in enumerate(ordered, 1):
            votes.append(keys.get(teacher))
            result.calls += 1
            result.usd += cost.get(teacher, 0.0)
            if decided(votes, len(ordered) - number, min_agreement):
                break
        skipped = ordered[len(votes):]
        result.calls_saved += len(skipped)
        result.usd_saved += sum(cost.get(t, 0.0) for t in skipped)
        full = [keys.get(t) for t in ordered]
        result.same_outcome += _outcome(votes, min_agreement) == _outcome(full, min_agreement)
    result.usd, result.usd_saved = round(result.usd, 6), round(result.usd_saved, 6)
    return result
