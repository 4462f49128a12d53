"""How often `replay.eval`'s 95% intervals cover the true rate, by the number of held-out traces (#47).

    python bench/eval_coverage.py [--repeats 1000] [--traces 2,3,5,10,15,20,25,30]

Synthetic clustered data, seeded: a trace's own rate is drawn around the true rate `p` (a Beta with mean
`p`; `spread` 0 makes every trace's rate `p` and its states independent, 0.5 makes the states of one
trace go together, as a model that misreads a task misreads its every turn), a trace holds 5..60
states (the shared fixtures' run held out 95 states in 2 traces). For each number of traces, the share
of `--repeats` data sets whose interval holds `p`: the percentile cluster bootstrap
(`statistics.percentile_interval`, what `replay.eval` gave for every rate before) and the cluster t
interval (`statistics.t_interval`, Student's t with traces - 1 degrees of freedom). Prints the markdown
table docs/evaluation.md holds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import numpy as np  # noqa: E402

from replay.evaluation.statistics import percentile_interval, t_interval  # noqa: E402

SCENARIOS = ((0.7, 0.0), (0.7, 0.5), (0.3, 0.5))   # (true rate, spread)


def dataset(rng: np.random.Generator, p: float, traces: int, spread: float) -> tuple[list[float], list[int]]:
    """Bernoulli states in `traces` traces of 5..60 states; each trace's rate a Beta around `p`."""
    values: list[float] = []
    clusters: list[int] = []
    for trace in range(traces):
        rate = p if spread == 0 else rng.beta(p / spread, (1 - p) / spread)
        size = int(rng.integers(5, 61))
        values += [float(x) for x in rng.random(size) < rate]
        clusters += [trace] * size
    return values, clusters


def coverage(p: float, spread: float, traces: int, repeats: int, resamples: int) -> tuple[float, float]:
    """The share of data sets whose percentile bootstrap / t interval holds `p`."""
    rng = np.random.default_rng(traces * 1000 + int(p * 100) + int(spread * 10))
    boot = t = 0
    for repeat in range(repeats):
        values, clusters = dataset(rng, p, traces, spread)
        first = percentile_interval(values, clusters, resamples=resamples, seed=repeat)
        second = t_interval(values, clusters)
        boot += first.low <= p <= first.high
        t += second.low <= p <= second.high
    return boot / repeats, t / repeats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--traces", default="2,3,5,10,15,20,25,30")
    args = parser.parse_args(argv)
    counts = [int(k) for k in args.traces.split(",")]
    head = " | ".join(f"p={p}, spread {s}: bootstrap / t" for p, s in SCENARIOS)
    print(f"| traces | {head} |")
    print("|---:|" + "---|" * len(SCENARIOS))
    for k in counts:
        cells = []
        for p, spread in SCENARIOS:
            boot, t = coverage(p, spread, k, args.repeats, args.resamples)
            cells.append(f"{boot:.1%} / {t:.1%}")
        print(f"| {k} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
