"""Every pool decided and written: `<out>/<pool>/dataset`, `pairs.jsonl` and `README.md`, as `replay.run`
writes them (`replay.export.dataset.export_dataset` + `write_card`).

Writing the datasets is most of an ablation's time: every pool's pairs carry whole prompts, encoded
to JSON by `datasets` once per pool. Pools are independent, so they are computed in forked worker
processes, one pool per task; the workers inherit the loaded run instead of unpickling it. Only the
counts and the pair ids come back. `REPLAY_ABLATE_WORKERS=1` (or no `fork`) keeps it in-process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingestion.schema import Action
from replay.ablation.evaluate import Decide, PoolCounts, evaluate_pool, jaccard
from replay.ablation.load import AblateConfig, RunData
from replay.ablation.pools import AblationError, pool_dirname, pool_name
from replay.export.card import source_kinds
from replay.export.dataset import JsonMemo
from replay.export.pairs import PromptMemo, confidence
from teachers.registry import TeacherSpec

_MAX_WORKERS = 8  # each worker holds one pool's rows and Arrow buffers; more rarely pays on disk


@dataclass
class _Job:
    out: Path
    command: str
    run: Path
    data: RunData
    pools: list[list[TeacherSpec]]
    deciders: dict[str, Decide]
    decide: Decide                       # every pool's, unless `deciders` has its judge's
    method: str
    min_agreement: float
    recoveries: dict[str, Action]        # failed state id → the student's recovery (hindsight)
    held_out: frozenset[str] | None      # the run's test traces: each pool's `test` split


_JOB: _Job | None = None  # set while forked workers run; they read it rather than receive it


def workers(pools: int) -> int:
    """How many processes write pools: `$REPLAY_ABLATE_WORKERS`, else one per CPU (at most 8).

    >>> workers(1)
    1
    """
    configured = os.environ.get("REPLAY_ABLATE_WORKERS", "").strip()
    if configured and not configured.isdigit():
        raise AblationError(f"REPLAY_ABLATE_WORKERS must be a whole number, got {configured!r}")
    wanted = int(configured) if configured else min(os.cpu_count() or 1, _MAX_WORKERS)
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(wanted, pools))


def evaluate_pools(config: AblateConfig, data: RunData, pools: list[list[TeacherSpec]],
                   deciders: dict[str, Decide], task: Callable[[str, int], Callable[[str], None]],
                   decide: Decide, method: str, min_agreement: float, recoveries: dict[str, Action],
                   held_out: frozenset[str] | None = None) -> tuple[list[PoolCounts], list[str]]:
    """Counts and folder name per pool, in pool order; Jaccard against the first (full) pool. With
    `held_out` (the run's test traces) every pool's dataset has `train` and `test` splits."""
    global _JOB
    # The memos are keyed by state id: another run read in this process (a library caller's, a test's)
    # may hold the same ids with other text (its own key's placeholders), so each ablation starts empty.
    _PROMPTS.clear()
    _ENCODED.clear()
    job = _Job(config.out_dir, config.command, config.run, data, pools, deciders, decide, method,
               min_agreement, recoveries, held_out)
    tick = task("pools", len(pools))
    results: list[tuple[PoolCounts, frozenset[str], str] | None] = [None] * len(pools)
    count = workers(len(pools))
    if count == 1:
        for number in range(len(pools)):
            results[number] = _write_pool(job, number)
            tick(_info(results[number]))
    else:
        _JOB = job
        try:
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(count, mp_context=context) as executor:
                futures = {executor.submit(_forked_pool, number): number for number in range(len(pools))}
                try:
                    for future in as_completed(futures):
                        results[futures[future]] = future.result()
                        tick(_info(results[futures[future]]))
                except BaseException:
                    executor.shutdown(cancel_futures=True)  # one pool failed: do not write the rest
                    raise
        finally:
            _JOB = None
    done = [r for r in results if r is not None]
    full = done[0][1]
    for counts, pair_ids, _ in done:
        counts.jaccard = jaccard(pair_ids, full)
    return [counts for counts, _, _ in done], [folder for _, _, folder in done]


def _info(result: tuple[PoolCounts, frozenset[str], str] | None) -> str:
    return f"{result[0].pool}: {result[0].pairs} pairs" if result else ""


# Every pool's rows share each state's prompt and tools, built and JSON-encoded once per process.
_PROMPTS: PromptMemo = {}
_ENCODED: JsonMemo = {}


def _forked_pool(number: int) -> tuple[PoolCounts, frozenset[str], str]:
    assert _JOB is not None, "worker started without a job (not forked?)"
    return _write_pool(_JOB, number)


def _write_pool(job: _Job, number: int) -> tuple[PoolCounts, frozenset[str], str]:
    import datasets

    from replay.export.dataset import export_dataset, write_card

    specs = job.pools[number]
    consensus = job.data.config.consensus
    decide = job.deciders.get(pool_name([s.name for s in specs])) or job.decide
    allow_same_family = job.data.config.pool.allow_same_family  # type: ignore[union-attr]
    result = evaluate_pool(specs, job.data.states, job.data.answers, decide, allow_same_family,
                           _PROMPTS, consensus.match, job.recoveries)
    folder = job.out / pool_dirname(result.counts.teachers)
    quiet = not datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # one bar per pool, from us, not a "Saving the dataset" bar each
    try:
        export_dataset(result.rows, folder, _ENCODED, held_out=job.held_out)
    finally:
        if not quiet:
            datasets.enable_progress_bars()
    write_card(folder, _card_info(job, result.counts, result.rows))
    return result.counts, result.pair_ids, folder.name


def _card_info(job: _Job, counts: PoolCounts, rows: list[dict[str, Any]]) -> dict[str, Any]:
    config = job.data.config
    return {
        "pretty_name": f"teacher-replay DPO pairs, pool {counts.pool}",
        "pairs": counts.pairs, "sources": source_kinds(rows),  # the card names no local path
        "student_models": sorted({r["student_model"] for r in rows if r.get("student_model")}),
        "teachers": counts.teachers, "excluded_teachers": counts.excluded_same_family,
        "method": job.method, "min_agreement": job.min_agreement,
        "match": config.consensus.match, "confidence": confidence(rows),
        "hindsight": counts.hindsight.model_dump(),
        "counts": {"states": counts.states, "all_teachers_excluded": counts.all_teachers_excluded,
                   "unanswered": counts.unanswered, "abstained": counts.abstained, "agree": counts.agree,
                   "pairs": counts.pairs},
        "cost_usd": counts.cost_usd, "command": job.command,
        "ablation_of": str(job.run), "run_command": config.command,
    }
