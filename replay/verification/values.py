"""What a pair's branches say: each action's value (its mean reward, with a 95% Wilson interval) and the
pair's outcome, from the 95% Newcombe interval of value_chosen − value_rejected. Pure.

The margin: `verified` when the interval's lower end is above 0, `flipped` when its upper end is below
0, `tied` otherwise (the same values, or too few samples to tell). Rewards are 0 or 1 and N is small
(a few samples per action), where the usual choices fail: the normal (Wald) interval collapses to a
point at 0/N and N/N, and so does a bootstrap (all samples equal), so two samples each would look
certain. Newcombe's hybrid score interval (method 10 in Newcombe 1998, built from each value's Wilson
interval) keeps its coverage there. What it asks of N: at N = 1 nothing is ever verified (1/1 vs 0/1
spans [-0.12, 1] once the uncertainty of each side is counted); at N = 2 only 2/2 against 0/2 is; at
N = 4, 3/4 against 0/4 and 4/4 against 1/4 are, 3/4 against 1/4 is not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from replay.train.wilson import wilson_bounds

Z = 1.959963984540054                       # the 97.5% normal quantile: 95% two-sided intervals
Outcome = Literal["verified", "flipped", "tied", "unverifiable"]


def wilson(successes: float, n: int, z: float = Z) -> tuple[float, float]:
    """The Wilson score interval of a proportion (rounded to 4 places); (0, 1) without samples.

    >>> wilson(2, 2), wilson(0, 2), wilson(0, 0)
    ((0.3424, 1.0), (0.0, 0.6576), (0.0, 1.0))
    """
    low, high = _wilson(successes, n, z)
    return round(low, 4), round(high, 4)


def _wilson(successes: float, n: int, z: float) -> tuple[float, float]:
    return wilson_bounds(successes, n, z) if n > 0 else (0.0, 1.0)


def newcombe(chosen: Sequence[float], rejected: Sequence[float], z: float = Z) -> tuple[float, float]:
    """The hybrid score interval of mean(chosen) − mean(rejected) (Newcombe 1998, method 10).

    >>> newcombe([1, 1], [0, 0]), newcombe([1], [0])
    ((0.07, 1.0), (-0.1221, 1.0))
    >>> newcombe([0, 0], [0, 0])
    (-0.6576, 0.6576)
    """
    p1, p2 = sum(chosen) / len(chosen), sum(rejected) / len(rejected)
    l1, u1 = _wilson(sum(chosen), len(chosen), z)
    l2, u2 = _wilson(sum(rejected), len(rejected), z)
    difference = p1 - p2
    lower = difference - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    upper = difference + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return round(max(lower, -1.0), 4), round(min(upper, 1.0), 4)


class Value(BaseModel):
    """One action's value at a state: the mean of its graded samples' rewards, with its interval."""

    value: float | None = None
    interval: tuple[float, float] | None = None
    rewards: list[float] = []              # graded samples, in sample order
    samples: int = 0                       # samples asked
    failed: int = 0                        # samples not graded (infrastructure: the student, the engine)


def value_of(rewards: Sequence[float | None], samples: int) -> Value:
    """An action's value from its samples' rewards (None: not graded).

    >>> value_of([1.0, None, 0.0], 3).model_dump(exclude={"rewards"})
    {'value': 0.5, 'interval': (0.0945, 0.9055), 'samples': 3, 'failed': 1}
    """
    graded = [r for r in rewards if r is not None]
    if not graded:
        return Value(samples=samples, failed=samples)
    return Value(value=round(sum(graded) / len(graded), 4), interval=wilson(sum(graded), len(graded)),
                 rewards=list(graded), samples=samples, failed=samples - len(graded))


def outcome_of(chosen: Value, rejected: Value) -> tuple[Outcome, tuple[float, float] | None]:
    """The pair's outcome and the interval of the difference (None when a side has no graded sample).

    >>> outcome_of(value_of([1, 1], 2), value_of([0, 0], 2))
    ('verified', (0.07, 1.0))
    >>> [outcome_of(value_of(a, len(a)), value_of(b, len(b)))[0] for a, b in (([0, 0], [1, 1]), ([1], [0]))]
    ['flipped', 'tied']
    >>> outcome_of(value_of([None], 1), value_of([1], 1))
    ('unverifiable', None)
    """
    if not chosen.rewards or not rejected.rewards:
        return "unverifiable", None
    lower, upper = newcombe(chosen.rewards, rejected.rewards)
    if lower > 0:
        return "verified", (lower, upper)
    if upper < 0:
        return "flipped", (lower, upper)
    return "tied", (lower, upper)


MARGIN_TEXT = ("verified: the 95% Newcombe (hybrid Wilson score) interval of value_chosen − value_rejected "
               "lies above 0; flipped: below 0; tied: it holds 0")
