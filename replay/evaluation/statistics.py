"""Rates with 95% intervals from a bootstrap that resamples whole traces. Pure (numpy only).

The states of one trace are not independent: a model that misreads a task tends to misread every turn
of it, and a trace's prompts extend each other. Resampling states one by one would treat 200 states of
10 traces as 200 independent draws and give intervals far too narrow. So a resample draws traces with
replacement (as many as there are) and takes the rate over all their states (a ratio of sums, since
traces differ in length): the cluster bootstrap. The interval is the resamples' 2.5th and 97.5th
percentiles. A paired difference is the same estimate over per-state differences (`b - a` on the
states both models were scored on), so the pairing within a trace is kept by construction.

What the interval is not: it says how much the rate would move over other held-out traces like these,
not over other runs, teachers or prompts. With few traces (under ~20) percentile intervals are too
narrow; a rate of 0 or 1 on every resample gives an interval of width 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from pydantic import BaseModel

RESAMPLES = 2000
LEVEL = 0.95
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

    @property
    def excludes_zero(self) -> bool:
        """The interval lies wholly above or below 0.

        >>> Interval(n=3, value=0.2, low=0.1, high=0.3).excludes_zero, Interval().excludes_zero
        (True, False)
        """
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


def cluster_bootstrap(values: Sequence[float], clusters: Sequence[Hashable], resamples: int = RESAMPLES,
                      seed: int = 0, level: float = LEVEL) -> Interval:
    """The mean of `values` and its percentile interval, resampling the clusters (traces) they belong to.

    >>> iv = cluster_bootstrap([1, 1, 0, 1, 0, 0, 1, 1], ["a", "a", "b", "b", "c", "c", "d", "d"], seed=1)
    >>> iv.n, iv.traces, iv.value, iv.low <= iv.value <= iv.high
    (8, 4, 0.625, True)
    >>> cluster_bootstrap([], []).value is None
    True
    """
    import numpy as np

    if len(values) != len(clusters):
        raise ValueError(f"{len(values)} values but {len(clusters)} cluster labels")
    if not values:
        return Interval()
    index: dict[Hashable, int] = {}
    labels = np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.int64,
                         count=len(clusters))
    data = np.asarray(values, dtype=float)
    sums = np.bincount(labels, weights=data, minlength=len(index))
    counts = np.bincount(labels, minlength=len(index)).astype(float)
    stats = _resampled(sums, counts, resamples, seed)
    tail = (1.0 - level) / 2
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return Interval(n=len(data), traces=len(index), hits=float(data.sum()),
                    value=round(float(data.mean()), 6), low=round(float(low), 6), high=round(float(high), 6))


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
                             resamples, seed)
