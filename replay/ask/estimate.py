"""`--dry-run` with teachers: what each teacher would cost, modelled, with nothing called."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from replay.select.filters import asked_states

if TYPE_CHECKING:
    from teachers.pool import TeacherPool


ESTIMATE_MODEL = ("prompt cache modelled per trace: a trace's first state at full price, then the prefix "
                  "each state shares with the previous one at the cached price where the provider caches "
                  "(teachers/prompt_cache.py); completion tokens per call learned from each teacher's "
                  "answers in the cache, else a prior (teachers/learned.py, configs/estimate.toml)")


def estimate_run(pool: TeacherPool, out: Path, batch: bool = False) -> dict[str, dict[str, float]]:
    """--dry-run with teachers: tokens and USD each teacher would cost; calls nothing. States are read
    in file order, which is each trace's turn order: the prompt cache is modelled per trace. `batch`:
    teachers with a batch API at batch rates."""
    from teachers.batch import batch_provider

    batched = {t.name for t in pool.teachers if batch and batch_provider(t)}
    totals: dict[str, dict[str, float]] = {}
    for state in asked_states(out):
        for est in pool.estimate(state, batched):
            row = totals.setdefault(est.teacher, {"calls": 0, "cached": 0, "prompt_tokens": 0,
                                                  "cached_prompt_tokens": 0, "completion_tokens": 0,
                                                  "cost_usd": 0.0, "cost_usd_low": 0.0,
                                                  "cost_usd_high": 0.0})
            row["calls"] += est.calls
            row["cached"] += est.cached
            row["prompt_tokens"] += est.prompt_tokens * est.calls
            row["cached_prompt_tokens"] += est.cached_prompt_tokens * est.calls
            row["completion_tokens"] += est.completion_tokens * est.calls
            row["cost_usd"] += est.cost_usd
            row["cost_usd_low"] += est.cost_usd_low
            row["cost_usd_high"] += est.cost_usd_high
            if est.batch:
                row["batch"] = True
                row["cost_usd_if_cached"] = row.get("cost_usd_if_cached", 0.0) + (est.cost_usd_if_cached
                                                                                   or 0.0)
    return totals
