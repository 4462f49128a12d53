"""Each teacher's share of what a pool achieves: Shapley values and leave-one-out deltas. Pure.

A pool's value v(S) (its pairs, its hindsight agreement, its cost) is a function of its set of
teachers, with v(∅) = 0. A teacher's Shapley value is its marginal contribution v(S ∪ {t}) − v(S)
averaged over every order the teachers could join in; the values add up to v(all) − v(∅) = v(all)
(efficiency), which `tests/test_ablate_quality.py` checks. Up to `EXACT_MAX` teachers it is computed
exactly from all 2^n subsets; beyond, from `permutations` orders drawn with a seeded generator, each
value with its standard error (the spread of its marginal contributions over √orders). Sampled values
add up exactly too: every order's contributions sum to v(all).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from itertools import combinations

from pydantic import BaseModel

EXACT_MAX = 8
Value = Callable[[frozenset[str]], float]


class Share(BaseModel):
    teacher: str
    value: float
    stderr: float = 0.0          # 0 when exact


def _memo(value: Value) -> Value:
    cache: dict[frozenset[str], float] = {}

    def get(pool: frozenset[str]) -> float:
        if not pool:
            return 0.0
        if pool not in cache:
            cache[pool] = value(pool)
        return cache[pool]

    return get


def exact_shapley(teachers: Sequence[str], value: Value) -> list[Share]:
    """Shapley values from every subset: Σ_S |S|!(n−|S|−1)!/n! (v(S ∪ {t}) − v(S)).

    >>> v = lambda s: {frozenset("a"): 1, frozenset("b"): 1, frozenset("ab"): 4}[s]
    >>> [(s.teacher, s.value) for s in exact_shapley(["a", "b"], v)]
    [('a', 2.0), ('b', 2.0)]
    """
    get = _memo(value)
    n = len(teachers)
    out = []
    for t in teachers:
        rest = [x for x in teachers if x != t]
        total = 0.0
        for size in range(n):
            coefficient = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for combo in combinations(rest, size):
                pool = frozenset(combo)
                total += coefficient * (get(pool | {t}) - get(pool))
        out.append(Share(teacher=t, value=round(total, 9)))
    return out


def sampled_shapley(teachers: Sequence[str], value: Value, permutations: int = 200,
                    seed: int = 0) -> list[Share]:
    """Shapley values from `permutations` random orders (seeded), with standard errors.

    >>> v = lambda s: float(len(s) ** 2)
    >>> shares = sampled_shapley(["a", "b", "c"], v, permutations=50)
    >>> round(sum(s.value for s in shares), 6), all(s.stderr > 0 for s in shares)
    (9.0, True)
    """
    get = _memo(value)
    rng = random.Random(seed)
    marginals: dict[str, list[float]] = {t: [] for t in teachers}
    for _ in range(permutations):
        order = list(teachers)
        rng.shuffle(order)
        pool: frozenset[str] = frozenset()
        before = 0.0
        for t in order:
            pool = pool | {t}
            after = get(pool)
            marginals[t].append(after - before)
            before = after
    out = []
    for t in teachers:
        values = marginals[t]
        mean = sum(values) / len(values)
        spread = math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1)) if len(values) > 1 \
            else 0.0
        out.append(Share(teacher=t, value=round(mean, 9), stderr=round(spread / math.sqrt(len(values)), 9)))
    return out


def shapley(teachers: Sequence[str], value: Value, permutations: int = 200, seed: int = 0,
            exact_max: int = EXACT_MAX) -> list[Share]:
    """Exact up to `exact_max` teachers, sampled beyond.

    >>> [s.value for s in shapley(["a", "b"], lambda s: float(len(s)))]
    [1.0, 1.0]
    """
    if len(teachers) <= exact_max:
        return exact_shapley(teachers, value)
    return sampled_shapley(teachers, value, permutations, seed)


def leave_one_out(teachers: Sequence[str], value: Value) -> dict[str, float]:
    """v(all) − v(all without t), per teacher: what the pool loses without it.

    >>> leave_one_out(["a", "b"], lambda s: {frozenset("a"): 1, frozenset("b"): 3, frozenset("ab"): 4}[s])
    {'a': 1.0, 'b': 3.0}
    """
    get = _memo(value)
    full = frozenset(teachers)
    return {t: round(float(get(full) - get(full - {t})), 9) for t in teachers}
