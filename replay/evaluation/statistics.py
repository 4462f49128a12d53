"""Rates with 95% intervals from a bootstrap that resamples whole traces. Pure (numpy only).

The states of one trace are not independent: a model that misreads a task tends to misread every turn
of it, and a trace's prompts extend each other. Resampling states one by one would treat 200 states of
10 traces as 200 independent draws and give intervals far too narrow. So a resample draws traces with
replacement (as many as there are) and takes the rate over all their states (a ratio of sums, since
traces differ in length): the cluster bootstrap. The interval is the resamples' 2.5th and 97.5th
percentiles. A paired difference is the same estimate over per-state differences (`b - a` on the
states both models were scored on), so the pairing within a trace is kept by construction.

With few traces the percentile interval is far too narrow (bench/eval_coverage.py: 95% intervals held
the true rate in about half the data sets of 2 traces, 88-92% over 10-15, 92-94% from 20 on). Under
`MIN_TRACES` an estimate takes the cluster t interval instead: the rate's linearised variance over
traces (each trace's sum of values less the rate times its states), Student's t with traces - 1 degrees
of freedom, cut to [0, 1] ([-1, 1] for a difference). It holds its coverage far better (88-95% over 2
traces) though not fully (87-91% over 3-10 traces whose states go together), so either way a rate over
fewer than `MIN_TRACES` traces is reported as unreliable (`Interval.method` says which interval).

What the interval is not: it says how much the rate would move over other held-out traces like these,
not over other runs, teachers or prompts. A rate of 0 or 1 in every trace gives an interval of width 0.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from pydantic import BaseModel

RESAMPLES = 2000
LEVEL = 0.95
MIN_TRACES = 20  # below it the percentile bootstrap's coverage fell under 90% (bench/eval_coverage.py)
_CELLS = 4_000_000  # resamples x traces drawn at once: bounds memory whatever the number of traces


class Interval(BaseModel):
    """An estimate over `n` states (`traces` traces): `value` is the plain rate (or mean difference),
    `low` and `high` its bootstrap interval; all None without states."""

    n: int = 0
    traces: int = 0
    hits: float = 0.0
    value: float | None = None
    low: float | None = None
    high: float | None = None
    method: str = "bootstrap"        # "bootstrap" (percentile, traces resampled) | "t" (under MIN_TRACES)

    @property
    def excludes_zero(self) -> bool:
        """The interval lies wholly above or below 0.

        >>> Interval(n=3, value=0.2, low=0.1, high=0.3).excludes_zero, Interval().excludes_zero
        (True, False)
        """
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


def interval_warning(traces: int) -> str | None:
    """Why intervals over `traces` held-out traces are not to be trusted; None from `MIN_TRACES` on.

    >>> interval_warning(25) is None, interval_warning(2)[:44]
    (True, 'intervals unreliable: only 2 held-out traces')
    """
    if traces >= MIN_TRACES:
        return None
    return (f"intervals unreliable: only {traces} held-out trace{'s' if traces != 1 else ''} (fewer than "
            f"{MIN_TRACES}). Simulated, a 95% bootstrap over 2 traces held the true rate about half the time "
            f"and 88-92% of it over 10-15; these are cluster t intervals instead (wider: 87-95% over 2 to 15 "
            f"traces), still rough. Hold out more traces (--test-split, --states sample:SHARE).")


def cluster_bootstrap(values: Sequence[float], clusters: Sequence[Hashable], resamples: int = RESAMPLES,
                      seed: int = 0, level: float = LEVEL,
                      bounds: tuple[float, float] = (0.0, 1.0)) -> Interval:
    """The mean of `values` and its interval over the clusters (traces) they belong to: the percentile
    cluster bootstrap from `MIN_TRACES` clusters on, the cluster t interval (cut to `bounds`) below.

    >>> cluster_bootstrap([1, 0] * 20, [c for c in range(20) for _ in "ab"]).method
    'bootstrap'
    >>> iv = cluster_bootstrap([1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 1], [c for c in "abcdef" for _ in "xy"])
    >>> iv.method, iv.traces, iv.value, iv.low, iv.high
    ('t', 6, 0.75, 0.4626, 1.0)
    """
    if len(set(clusters)) >= MIN_TRACES:
        return percentile_interval(values, clusters, resamples, seed, level)
    return t_interval(values, clusters, level, bounds)


def percentile_interval(values: Sequence[float], clusters: Sequence[Hashable], resamples: int = RESAMPLES,
                        seed: int = 0, level: float = LEVEL) -> Interval:
    """The mean of `values` and its percentile interval, resampling the clusters (traces) they belong to.

    >>> iv = percentile_interval([1, 1, 0, 1, 0, 0, 1, 1], ["a", "a", "b", "b", "c", "c", "d", "d"], seed=1)
    >>> iv.n, iv.traces, iv.value, iv.low <= iv.value <= iv.high
    (8, 4, 0.625, True)
    >>> percentile_interval([], []).value is None
    True
    """
    import numpy as np

    if not values:
        _check(values, clusters)
        return Interval()
    data, sums, counts = _by_cluster(values, clusters)
    stats = _resampled(sums, counts, resamples, seed)
    tail = (1.0 - level) / 2
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return Interval(n=len(data), traces=len(counts), hits=float(data.sum()),
                    value=round(float(data.mean()), 6), low=round(float(low), 6), high=round(float(high), 6))


def t_interval(values: Sequence[float], clusters: Sequence[Hashable], level: float = LEVEL,
               bounds: tuple[float, float] = (0.0, 1.0)) -> Interval:
    """The mean of `values` (a ratio of sums over clusters) with a cluster t interval: the ratio's
    linearised variance `K / (K - 1) * sum((s_k - r * n_k) ** 2) / N ** 2` over the K clusters,
    Student's t with K - 1 degrees of freedom, cut to `bounds`; one cluster gives `bounds` itself.

    >>> iv = t_interval([1, 0, 1, 1], ["a", "a", "b", "b"])
    >>> iv.value, iv.low, iv.high, iv.method
    (0.75, 0.0, 1.0, 't')
    >>> t_interval([], []).value is None
    True
    """
    import numpy as np

    if not values:
        _check(values, clusters)
        return Interval(method="t")
    data, sums, counts = _by_cluster(values, clusters)
    k, rate = len(counts), float(data.mean())
    low, high = bounds
    if k > 1:
        spread = math.sqrt(k / (k - 1) * float(np.sum((sums - rate * counts) ** 2))) / float(counts.sum())
        half = t_quantile(level, k - 1) * spread
        low, high = max(bounds[0], rate - half), min(bounds[1], rate + half)
    return Interval(n=len(data), traces=k, hits=float(data.sum()), value=round(rate, 6),
                    low=round(low, 6), high=round(high, 6), method="t")


def t_quantile(level: float, df: int) -> float:
    """The `t` with P(|T| <= t) = `level` for Student's T with `df` (whole) degrees of freedom, by
    bisection on the exact distribution function.

    >>> round(t_quantile(0.95, 1), 3), round(t_quantile(0.95, 4), 3), round(t_quantile(0.95, 29), 3)
    (12.706, 2.776, 2.045)
    """
    low, high = 0.0, 1.0
    while _t_central(high, df) < level:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_central(middle, df) < level else (low, middle)
    return (low + high) / 2


def _t_central(t: float, df: int) -> float:
    """P(|T| <= t) for Student's T with `df` degrees of freedom (the closed forms for whole df)."""
    theta = math.atan(t / math.sqrt(df))
    cos2, term = math.cos(theta) ** 2, 1.0
    if df % 2:
        total = 0.0
        for j in range(1, (df - 1) // 2 + 1):       # 1, 2/3 cos^2, (2*4)/(3*5) cos^4, ...
            total, term = total + term, term * cos2 * (2 * j) / (2 * j + 1)
        if df == 1:
            return 2 * theta / math.pi
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    total = 0.0
    for j in range(1, df // 2 + 1):                  # 1, 1/2 cos^2, (1*3)/(2*4) cos^4, ...
        total, term = total + term, term * cos2 * (2 * j - 1) / (2 * j)
    return math.sin(theta) * total


def _check(values: Sequence[float], clusters: Sequence[Hashable]) -> None:
    if len(values) != len(clusters):
        raise ValueError(f"{len(values)} values but {len(clusters)} cluster labels")


def _by_cluster(values: Sequence[float], clusters: Sequence[Hashable]) -> tuple[object, object, object]:
    """The values as an array, and per cluster (in order of first appearance) their sum and count."""
    import numpy as np

    _check(values, clusters)
    index: dict[Hashable, int] = {}
    labels = np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.int64,
                         count=len(clusters))
    data = np.asarray(values, dtype=float)
    sums = np.bincount(labels, weights=data, minlength=len(index))
    counts = np.bincount(labels, minlength=len(index)).astype(float)
    return data, sums, counts


def _resampled(sums: object, counts: object, resamples: int, seed: int) -> object:
    """The statistic (sum of values / number of states) over `resamples` draws of the clusters with
    replacement; each draw counts how often every cluster was taken (a multinomial), in blocks."""
    import numpy as np

    rng = np.random.default_rng(seed)
    clusters = len(counts)  # type: ignore[arg-type]
    block = max(1, _CELLS // clusters)
    out = []
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        taken = rng.multinomial(clusters, np.full(clusters, 1.0 / clusters), size=size)
        out.append((taken @ sums) / (taken @ counts))  # every cluster holds a state: never 0 / 0
    return np.concatenate(out)


def paired_difference(first: dict[str, float], second: dict[str, float], trace_of: dict[str, str],
                      resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """`second - first` on the states both were scored on (state id -> 0/1), resampling traces.

    >>> a = {"s1": 1.0, "s2": 0.0, "s3": 1.0}
    >>> b = {"s1": 1.0, "s2": 1.0, "s4": 1.0}
    >>> d = paired_difference(a, b, {"s1": "t1", "s2": "t2", "s3": "t1", "s4": "t2"})
    >>> d.n, d.value
    (2, 0.5)
    """
    shared = sorted(first.keys() & second.keys())
    return cluster_bootstrap([second[s] - first[s] for s in shared], [trace_of[s] for s in shared],
                             resamples, seed, bounds=(-1.0, 1.0))
