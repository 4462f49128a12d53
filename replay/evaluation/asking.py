"""Asking the models at the held-out states exactly as the run asked its teachers.

Each model is a `TeacherSpec` (`--models` is read by `teachers.registry.parse_pool`, the syntax of
`--teachers`) in one `TeacherPool` built by `replay.ask.pool.build_pool` from the run's own pool
settings: the same request per state (`teachers.request.build_request`: the state's messages and tools),
the run's cache (an answer it holds costs nothing; a new one is stored for the next eval), its pacing,
timeouts, retries and redaction of answers, and a `--max-cost` cap of its own.
Sample 0 only: one answer per model and state.

Same-family exclusion is off: it keeps a teacher from grading its own family's student, while the models
evaluated here are students (the base student is of the student's family by definition).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ingestion.schema import Proposal, TraceState
from replay.options import PoolOptions

if TYPE_CHECKING:
    from teachers.pool import TeacherPool
    from teachers.registry import TeacherSpec

Answers = dict[str, dict[str, Proposal]]  # model name -> state id -> its answer


def eval_options(run_options: PoolOptions, max_cost: float | None) -> PoolOptions:
    """The run's pool settings for the models: one sample, no same-family exclusion, no batch API,
    this eval's budget.

    >>> eval_options(PoolOptions(teachers="a", samples=3, max_cost=5.0), None).samples
    1
    """
    return run_options.model_copy(update={"samples": 1, "allow_same_family": True, "batch": False,
                                          "max_cost": max_cost})


def open_pool(run_options: PoolOptions, specs: list[TeacherSpec], max_cost: float | None) -> TeacherPool:
    from replay.ask.pool import build_pool

    return build_pool(eval_options(run_options, max_cost), specs)


async def ask_models(pool: TeacherPool, specs: Sequence[TeacherSpec], states: Sequence[TraceState],
                     tick: Callable[[str], None]) -> Answers:
    """Every model's answer at every state: traces concurrently, each trace's states in turn order
    (a trace's requests extend each other: the provider's prompt cache), the models of one state at once."""
    answers: Answers = {spec.name: {} for spec in specs}
    traces: dict[str, list[TraceState]] = {}
    for state in states:
        traces.setdefault(state.trace_id, []).append(state)

    async def one_trace(turns: list[TraceState]) -> None:
        for state in turns:
            got = await asyncio.gather(*(pool.ask(spec, state, 0) for spec in specs))
            for spec, proposal in zip(specs, got, strict=True):
                answers[spec.name][state.state_id] = proposal
            stats = pool.stats
            tick(f"calls {stats.made} · cached {stats.cached} · failed {stats.failed}")

    await asyncio.gather(*(one_trace(turns) for turns in traces.values()))
    return answers


def estimate_models(pool: TeacherPool, states: Sequence[TraceState]) -> dict[str, dict[str, Any]]:
    """--dry-run: per model the calls, those the cache holds, tokens and USD (with the pool's low / high
    bounds); nothing is called. States in turn order: the prompt cache is modelled per trace."""
    totals: dict[str, dict[str, Any]] = {}
    for state in states:
        for est in pool.estimate(state):
            row = totals.setdefault(est.teacher, {"calls": 0, "cached": 0, "prompt_tokens": 0,
                                                  "completion_tokens": 0, "cost_usd": 0.0,
                                                  "cost_usd_low": 0.0, "cost_usd_high": 0.0})
            row["calls"] += est.calls
            row["cached"] += est.cached
            row["prompt_tokens"] += est.prompt_tokens * est.calls
            row["completion_tokens"] += est.completion_tokens * est.calls
            row["cost_usd"] += est.cost_usd
            row["cost_usd_low"] += est.cost_usd_low
            row["cost_usd_high"] += est.cost_usd_high
    return totals


def model_calls(pool: TeacherPool, name: str) -> dict[str, Any]:
    """What asking one model took: calls made / cached / failed / malformed, tokens, USD."""
    stats = pool.stats.teacher(name)
    return {"made": stats.made, "cached": stats.cached, "failed": stats.failed, "malformed": stats.invalid,
            "budget_exhausted": stats.budget_exhausted, "prompt_tokens": stats.prompt_tokens,
            "completion_tokens": stats.completion_tokens, "cost_usd": round(stats.cost_usd, 6)}
