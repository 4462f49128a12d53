"""Completion tokens per teacher call for estimates: learned from the teacher's own answers in the
response cache (mean, p10, p90), else a per-model prior from configs/estimate.toml that counts the hidden
reasoning tokens of reasoning models (#28). Each figure says where it came from."""

from __future__ import annotations

import math
import sqlite3
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from configs import config_path
from teachers.llm import load_litellm
from teachers.registry import TeacherSpec

_RECENT = 5_000  # answers read per model: the latest, so a changed prompt or model version shows


@lru_cache(maxsize=1)
def priors() -> dict[str, Any]:
    with open(config_path("estimate.toml"), "rb") as handle:
        return tomllib.load(handle)


@dataclass(frozen=True)
class Completion:
    """Completion tokens per call: `mean` prices the estimate, `low`..`high` its range."""

    mean: int
    low: int
    high: int
    source: str


def percentile(values: list[int], share: float) -> int:
    """The nearest-rank percentile of sorted `values`.

    >>> percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9), percentile([5], 0.1)
    (9, 5)
    """
    return values[min(max(math.ceil(share * len(values)) - 1, 0), len(values) - 1)]


def is_reasoning(teacher: TeacherSpec) -> bool:
    """Whether the teacher bills hidden reasoning as completion tokens.

    >>> [is_reasoning(TeacherSpec(name=n, model=n)) for n in ("gpt-5", "gpt-4o")]
    [True, False]
    """
    model = (teacher.price.as_model if teacher.price and teacher.price.as_model else None) or teacher.model
    try:
        info = load_litellm().get_model_info(model)
    except Exception:  # not in the cost map
        info = {}
    if not info.get("supports_reasoning"):
        return bool({"reasoning_effort", "thinking"} & set(teacher.params))
    if "claude" in model or model.startswith("anthropic/"):  # thinks only when asked to
        return bool({"reasoning_effort", "thinking"} & set(teacher.params))
    return teacher.params.get("reasoning_effort") not in ("none", "minimal")


def prior(teacher: TeacherSpec) -> Completion:
    """The configured assumption for a teacher never seen answering.

    >>> prior(TeacherSpec(name="a", model="gpt-4o")).source
    'prior for non-reasoning models (configs/estimate.toml)'
    """
    kind = "reasoning" if is_reasoning(teacher) else "plain"
    rule = priors()[kind]
    label = "reasoning" if kind == "reasoning" else "non-reasoning"
    return Completion(rule["mean"], rule["low"], rule["high"],
                      f"prior for {label} models (configs/estimate.toml)")


def _answers(path: Path, model: str) -> list[int]:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as db:
            rows = db.execute("SELECT completion_tokens FROM responses WHERE model = ? AND error IS NULL "
                              "AND completion_tokens > 0 ORDER BY created DESC LIMIT ?", (model, _RECENT))
            return sorted(int(n) for (n,) in rows)
    except sqlite3.Error:  # no cache yet, or not one we can read: the prior
        return []


def learned(teacher: TeacherSpec, cache_path: Path | None) -> Completion:
    """From the cache's answers of this teacher's model when there are enough, else the prior."""
    values = _answers(cache_path, teacher.model) if cache_path and str(cache_path) != ":memory:" else []
    if len(values) < priors()["min_answers"]:
        return prior(teacher)
    mean = round(sum(values) / len(values))
    return Completion(mean, percentile(values, 0.1), percentile(values, 0.9),
                      f"{len(values)} answers of {teacher.model} in the cache (mean {mean}, "
                      f"p90 {percentile(values, 0.9)})")
