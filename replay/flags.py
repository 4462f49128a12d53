"""argparse types with ranges: a bad value is one line and exit 2 before any work, never a clamp,
a traceback, or an error after the calls were paid for."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

from replay.rundir.outdir import writable_dir_problem


def _number(text: str, kind: type) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") \
            from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def at_least(low: int) -> Callable[[str], int]:
    """An integer >= `low`.

    >>> at_least(1)("3")
    3
    >>> at_least(1)("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be an integer >= 1, got 0
    """
    def parse(text: str) -> int:
        value = int(_number(text, int))
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def positive_float(text: str) -> float:
    """A finite number > 0 (seconds).

    >>> positive_float("0.5")
    0.5
    >>> positive_float("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be a number > 0, got 0.0
    """
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {value}")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds >= 0.

    >>> seconds("0"), seconds("2.5")
    (0.0, 2.5)
    """
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {value}")
    return value


def usd(text: str) -> float:
    """A finite amount >= 0 (0: answers from the cache only).

    >>> usd("2.5")
    2.5
    >>> usd("nan")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: 'nan' is not a finite number
    """
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an amount >= 0, got {value}")
    return value


def fraction(upper_open: bool, lower_open: bool = False) -> Callable[[str], float]:
    """A share in [0, 1], either end left out when open.

    >>> fraction(True)("0.5"), fraction(False)("1"), fraction(True)("0")
    (0.5, 1.0, 0.0)
    >>> fraction(True)("1")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be in [0, 1), got 1.0
    >>> fraction(True, lower_open=True)("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be in (0, 1), got 0.0
    """
    def parse(text: str) -> float:
        value = _number(text, float)
        if (value < 0 or value > 1 or (upper_open and value == 1) or (lower_open and value == 0)):
            raise argparse.ArgumentTypeError(f"must be in {'(' if lower_open else '['}0, 1"
                                             f"{')' if upper_open else ']'}, got {value}")
        return value

    parse.__name__ = "fraction"
    return parse


def out_folder(text: str) -> Path:
    """A folder that is, or can be made, writable (existing content is judged later, by the run)."""
    path = Path(text).expanduser()
    if problem := writable_dir_problem(path):
        raise argparse.ArgumentTypeError(f"{text} {problem}")
    return path
