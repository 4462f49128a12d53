"""The 95% Wilson score interval of a share. Pure, standard library only: the GPU bench script
(bench/train_gpu.py) uses it where the project's other dependencies are not installed."""

from __future__ import annotations

import math

Z95 = 1.959964


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of `successes` out of `n` (None without any trial).

    >>> wilson(8, 8)
    (0.6756, 1.0)
    >>> wilson(0, 10)
    (0.0, 0.2775)
    >>> wilson(0, 0) is None
    True
    """
    if n <= 0:
        return None
    low, high = wilson_bounds(successes, n, z)
    return round(low, 4), round(high, 4)


def wilson_bounds(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The interval unrounded, within [0, 1], for `n` > 0 trials (replay.verification builds Newcombe's
    interval of a difference from two of them).

    >>> [round(x, 4) for x in wilson_bounds(1, 2)]
    [0.0945, 0.9055]
    """
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(centre - half, 0.0), min(centre + half, 1.0)
