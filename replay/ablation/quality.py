"""The judging half of an ablation: each teacher's reliability and share, the cost frontier, the asking
order, and the weighted vote against the majority vote. From the answers in hand, no calls.

Shapley values need every subset's value (up to 8 teachers; sampled orders beyond): a subset the
ablation did not compute as a pool is counted here without building its dataset
(`evaluate_pool(rows=False)`), once, and kept for the frontier too. Judge runs decide only the pools
they judged, so their Shapley values and frontier cover those pools only when every subset was judged
(`--all-subsets`); otherwise they are left out, and the JSON says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from consensus.reliability import Reliability, dawid_skene
from replay.ablation.evaluate import PoolCounts, evaluate_pool, method_decider
from replay.ablation.pools import MAX_SUBSET_TEACHERS, all_subsets
from replay.ablation.shapley import Share, leave_one_out, shapley
from replay.ablation.teachers import AskingOrder, Point, asking_order, frontier, recommend, vote_items
from teachers.registry import TeacherSpec

METRICS = {"pairs": lambda c: float(c.pairs),
           "hindsight_intent": lambda c: c.hindsight.intent_rate or 0.0,
           "hindsight_exact": lambda c: c.hindsight.exact_rate or 0.0,
           "cost_usd": lambda c: c.cost_usd}


class TeacherRow(BaseModel):
    teacher: str
    reliability: float | None = None
    answers: int = 0
    cost_usd: float = 0.0
    shapley: dict[str, float] = Field(default_factory=dict)
    stderr: dict[str, float] = Field(default_factory=dict)
    leave_one_out: dict[str, float] = Field(default_factory=dict)


class Quality(BaseModel):
    method: str
    min_agreement: float
    teachers: list[TeacherRow]
    reliability: Reliability
    shapley_exact: bool | None = None         # None: not computed (see `skipped`)
    permutations: int = 0
    full_value: dict[str, float] = Field(default_factory=dict)
    frontier: list[Point] = Field(default_factory=list)
    frontier_pools: str = "computed"           # "all subsets" when every subset was counted
    recommended: str | None = None
    recommend_margin: float | None = None
    recommend_why: str | None = None
    asking_orders: list[AskingOrder] = Field(default_factory=list)
    methods: dict[str, PoolCounts] = Field(default_factory=dict)  # the full pool, vote vs weighted
    skipped: list[str] = Field(default_factory=list)


def estimate_reliability(data: Any, specs: Sequence[TeacherSpec]
                         ) -> tuple[Reliability, list[dict[str, str]]]:
    """Dawid–Skene over the full pool's intent keys (per tool family too), and the keys per state."""
    allow = data.config.pool.allow_same_family
    items, families = vote_items(data.states, data.answers, specs, allow, data.config.consensus.match)
    return dawid_skene(items, families), items


def _counter(data: Any, specs: Sequence[TeacherSpec], known: dict[frozenset[str], PoolCounts],
             decide: Any, recoveries: Any, judged: bool) -> Callable[[frozenset[str]], PoolCounts | None]:
    by_name = {s.name: s for s in specs}
    order = [s.name for s in specs]
    consensus = data.config.consensus
    allow = data.config.pool.allow_same_family

    def counts(pool: frozenset[str]) -> PoolCounts | None:
        if pool not in known:
            if judged:
                return None
            members = [by_name[n] for n in order if n in pool]
            known[pool] = evaluate_pool(members, data.states, data.answers, decide, allow, None,
                                        consensus.match, recoveries, rows=False).counts
        return known[pool]

    return counts


def assess(data: Any, specs: list[TeacherSpec], rows: list[PoolCounts], method: str, min_agreement: float,
           reliability: Reliability, items: list[dict[str, str]], recoveries: Any,
           margin: float | None = None, permutations: int = 200) -> Quality:
    """Everything above, for the run's full pool `specs`; `rows` are the pools the ablation computed."""
    names = [s.name for s in specs]
    match = data.config.consensus.match
    known = {frozenset(r.teachers): r for r in rows}
    judged = method == "judge"
    decide = method_decider(method, min_agreement, match, reliability.weight)
    counts = _counter(data, specs, known, decide, recoveries, judged)
    quality = Quality(method=method, min_agreement=min_agreement, reliability=reliability,
                      teachers=[TeacherRow(teacher=n, reliability=reliability.teachers.get(n))
                                for n in names])
    spent = {n: 0.0 for n in names}
    answered = {n: 0 for n in names}
    for proposals in data.answers.values():
        for p in proposals:
            if p.teacher in spent:
                spent[p.teacher] += p.cost_usd
                answered[p.teacher] += int(p.action is not None)
    for row in quality.teachers:
        row.cost_usd, row.answers = round(spent[row.teacher], 6), answered[row.teacher]
    subsets_ok = not judged or (len(names) <= MAX_SUBSET_TEACHERS
                                and all(frozenset(s) in known for s in all_subsets(names)))
    if subsets_ok:
        quality.shapley_exact = len(names) <= MAX_SUBSET_TEACHERS
        quality.permutations = 0 if quality.shapley_exact else permutations
        full = counts(frozenset(names))
        assert full is not None
        for metric, read in METRICS.items():
            def value(pool: frozenset[str], read: Callable[[PoolCounts], float] = read) -> float:
                got = counts(pool)
                return read(got) if got is not None else 0.0

            shares: list[Share] = shapley(names, value, permutations)
            loo = leave_one_out(names, value)
            quality.full_value[metric] = read(full)
            for row, share in zip(quality.teachers, shares, strict=True):
                row.shapley[metric] = share.value
                if not quality.shapley_exact:
                    row.stderr[metric] = share.stderr
                row.leave_one_out[metric] = loo[row.teacher]
    else:
        quality.skipped.append("shapley: a --consensus judge run decides only the pools it judged; "
                               "pass --all-subsets (with --allow-calls) for every teacher's share")
    pools = list(known.values())
    quality.frontier_pools = "all subsets" if len(pools) == 2 ** len(names) - 1 else "computed"
    quality.frontier = frontier(pools)
    if margin is not None:
        picked = recommend(quality.frontier, margin)
        if picked is not None:
            quality.recommended, quality.recommend_why = picked[0].pool, picked[1]
            quality.recommend_margin = margin
    quality.asking_orders = _orders(data, specs, items, reliability, spent, answered, min_agreement)
    if not judged:
        allow = data.config.pool.allow_same_family
        for name in ("vote", "weighted"):
            if name == method:  # the ablation's own full pool, already counted
                quality.methods[name] = rows[0]
                continue
            by = method_decider(name, min_agreement, match, reliability.weight)
            quality.methods[name] = evaluate_pool(specs, data.states, data.answers, by, allow, None, match,
                                                  recoveries, rows=False).counts
    return quality


def _orders(data: Any, specs: list[TeacherSpec], items: list[dict[str, str]], reliability: Reliability,
            spent: dict[str, float], answered: dict[str, int], min_agreement: float) -> list[AskingOrder]:
    asked = [sorted({p.teacher for p in data.answers.get(s.state_id, ())}) for s in data.states]
    names = [s.name for s in specs]
    per_call = {n: spent[n] / max(answered[n], 1) for n in names}
    cheapest = sorted(names, key=lambda n: (per_call[n], names.index(n)))
    reliable = sorted(names, key=lambda n: (-reliability.teachers.get(n, 0.0), per_call[n], names.index(n)))
    return [asking_order(name, order, items, asked, per_call, min_agreement)
            for name, order in (("cheapest first", cheapest), ("most reliable first", reliable))]
