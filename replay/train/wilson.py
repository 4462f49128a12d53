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
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)
