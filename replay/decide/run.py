"""The decide stage over a whole run: every selected state asked and decided, its files and counts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ingestion.schema import ReplayError
from replay.ask.batches import prefetch_batches
from replay.ask.looplag import LoopLag, QuietGC
from replay.decide.consensus import Judge
from replay.decide.hindsight import read_recoveries
from replay.decide.states import Outcomes, finish_hindsight, replay_states, tier_counts
from replay.decide.verdicts import VERDICTS_FILE
from replay.export.formats import KEEP
from replay.options import RunConfig
from replay.progress import progress_bar
from replay.rundir.files import PROPOSALS_FILE, write_jsonl
from replay.rundir.report import Report, failure_kinds
from replay.select.filters import asked_states

if TYPE_CHECKING:
    from teachers.pool import TeacherPool
    from teachers.registry import TeacherSpec


def decide_states(work: Path, config: RunConfig, pool: TeacherPool, judge_spec: TeacherSpec | None,
                  report: Report, console: Console) -> list[dict[str, Any]]:
    """Teachers → consensus → pairs for every selected state in `work`; proposals.jsonl and
    verdicts.jsonl written; the report's counts filled. Returns the rows of the chosen --format."""
    with QuietGC() as quiet:
        outcomes, judge, lag = asyncio.run(_replay(work, config, pool, judge_spec, report, console, quiet))
    proposals = (p.model_dump(mode="json") for p in outcomes.ordered_proposals())
    write_jsonl(work / PROPOSALS_FILE, proposals)
    write_jsonl(work / VERDICTS_FILE, outcomes.ordered_verdicts())
    finish_hindsight(outcomes, read_recoveries(work))  # recoveries among all states, asked or not
    _fill_report(report, pool, outcomes, judge)
    report.extra["loop_lag_ms"] = {**lag.summary(), "full_collections": quiet.catch_ups}
    report.extra["failure_kinds"] = failure_kinds(outcomes.ordered_proposals())
    return outcomes.ordered_rows()


async def _replay(work: Path, config: RunConfig, pool: TeacherPool, judge_spec: TeacherSpec | None,
                  report: Report, console: Console, quiet: QuietGC) -> tuple[Outcomes, Judge | None, LoopLag]:
    judge = None
    if config.consensus.method == "judge":
        if judge_spec is None:
            raise ReplayError("--consensus judge needs --judge MODEL")
        judge = Judge(judge_spec, pool.cache, pool)
    if config.pool is not None and config.pool.batch:
        report.extra["batch"] = await prefetch_batches(work, config, pool, console)
    with progress_bar(report.states - report.states_unselected, "teachers", console) as (bar, task):
        def tick() -> None:
            stats = pool.stats
            bar.update(task, advance=1, info=f"calls {stats.made} · cached {stats.cached} · "
                                             f"failed {stats.failed} · ${stats.cost_usd:.4f}")

        async with LoopLag() as lag, quiet.freezing():
            try:
                outcomes = await replay_states(
                    asked_states(work), pool, config.consensus, judge, on_state=tick,
                    again=lambda: asked_states(work), keep=KEEP[config.export.format],
                    trace_parallel=config.pool.trace_parallel if config.pool else 1)
            except* ReplayError as group:  # a cache fault in one task stops them all: say it once
                raise group.exceptions[0] from None
    return outcomes, judge, lag


def _fill_report(report: Report, pool: TeacherPool, outcomes: Outcomes, judge: Judge | None) -> None:
    pool_report = pool.stats.to_report()
    report.teacher_calls = pool_report["teacher_calls"]
    report.excluded_same_family = pool_report["excluded_same_family"]
    report.tokens = pool_report["tokens"]
    report.cost_usd = pool_report["cost_usd"]
    report.extra["per_teacher"] = pool_report["per_teacher"]
    report.extra["rate_limits"] = pool.pacing()
    prompt = report.tokens["prompt"]
    share = report.tokens["cached_prompt"] / prompt if prompt else 0.0
    report.extra["prompt_cache"] = {"hit_share": round(share, 4)}
    report.extra["spend"] = {"max_cost": pool.spend.cap,
                             "largest_call_usd": round(pool.spend.largest_call, 6)}
    verdicts = outcomes.verdicts
    report.states_all_teachers_excluded = verdicts["all_teachers_excluded"]
    report.states_failed, report.states_budget_stopped = verdicts["failed"], outcomes.budget_stopped
    report.consensus = {"reached": verdicts["agree"] + verdicts["pair"], "abstained": verdicts["abstained"],
                        **tier_counts(outcomes.tiers, outcomes.agree_tiers)}
    if outcomes.invalid:  # screened out against the state's tools: no vote, never chosen
        screened = sum(outcomes.invalid.values())
        report.teacher_calls["invalid"] = report.teacher_calls.get("invalid", 0) + screened
        report.extra["invalid_proposals"] = dict(sorted(outcomes.invalid.items()))
    report.agree, report.pairs = verdicts["agree"], verdicts["pair"]
    report.hindsight = outcomes.hindsight.model_dump()
    if outcomes.reliability is not None:  # --consensus weighted: the weights it voted with
        report.extra["reliability"] = outcomes.reliability.model_dump()
    report.extra["early_stop"] = {"calls_saved": outcomes.calls_saved,
                                  "usd_saved": round(outcomes.usd_saved, 6)}
    if judge is not None:
        report.extra["judge_calls"] = judge.calls
        report.cost_usd = round(report.cost_usd + judge.cost_usd, 6)
