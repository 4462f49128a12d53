"""What an ablation must ask (only with `--allow-calls`): answers the run lacks, and judgements.

Both go through a `TeacherPool` built from the run's own settings (cache, concurrency, samples,
redaction, `--max-cost`), so an answer or judgement the cache holds costs nothing and a new one is
stored for the next ablation. One event loop: the caller runs `ask_missing` with `asyncio.run`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from consensus.result import ConsensusResult
from consensus.validity import screen
from ingestion.schema import Proposal, TraceState
from replay.ablation.evaluate import Decide, pool_proposals
from replay.ablation.pools import AblationError, pool_name
from teachers.registry import TeacherSpec, parse_pool

if TYPE_CHECKING:
    from replay.ablation.load import RunData
    from teachers.pool import TeacherPool

Task = Callable[[str, int], Callable[[str], None]]  # (label, total) -> tick(info)


async def ask_missing(data: RunData, pools: list[list[TeacherSpec]], gaps: list[tuple[int, TeacherSpec, int]],
                      calls: Counter[str], task: Task, judge: bool = True) -> dict[str, Decide]:
    """Ask every gap (state index, teacher, sample) and add the answers to `data.answers`; for a
    `--consensus judge` run, judge every pool. Returns the judge's decider per pool name ({} else)."""
    from replay.ask.pool import build_pool

    assert data.config.pool is not None
    pool = build_pool(data.config.pool, data.specs)
    try:
        if gaps:
            tick = task("teachers", len(gaps))

            async def one(index: int, spec: TeacherSpec, sample: int) -> Proposal:
                try:
                    return await pool.ask(spec, data.states[index], sample)
                finally:
                    stats = pool.stats
                    tick(f"calls {stats.made} · cached {stats.cached} · failed {stats.failed}")

            # Gaps are in state order, so each state's request is built (and redacted) once for all.
            for proposal in await asyncio.gather(*(one(*gap) for gap in gaps)):
                data.answers.setdefault(proposal.state_id, []).append(proposal)
            calls.update(made=pool.stats.made, cached=pool.stats.cached, failed=pool.stats.failed)
        if not judge or data.config.consensus.method != "judge":
            return {}
        return await _judge_pools(data, pools, pool, calls, task)
    finally:
        pool.cache.close()


async def _judge_pools(data: RunData, pools: list[list[TeacherSpec]], pool: TeacherPool, calls: Counter[str],
                       task: Task) -> dict[str, Decide]:
    from replay.decide.consensus import Judge

    if not data.config.consensus.judge:
        raise AblationError("the run used --consensus judge without --judge MODEL: nothing to judge with")
    judge = Judge(parse_pool(data.config.consensus.judge)[0], pool.cache, pool)
    window = asyncio.Semaphore(pool.concurrency)
    allow_same_family = data.config.pool.allow_same_family  # type: ignore[union-attr]
    tick = task("judge", len(pools) * len(data.states))

    async def one(state: TraceState, proposals: list[Proposal], into: dict[str, ConsensusResult]) -> None:
        async with window:
            into[state.state_id] = await judge.decide(state, proposals)
        tick("")

    deciders: dict[str, Decide] = {}
    for specs in pools:
        judged: dict[str, ConsensusResult] = {}
        jobs = []
        for state in data.states:
            excluded, proposals = pool_proposals(specs, state, data.answers, allow_same_family)
            if len(excluded) < len(specs) and proposals:
                jobs.append(one(state, screen(proposals, state.tools), judged))
            else:
                tick("")  # nothing to judge: the state's verdict needs no consensus
        await asyncio.gather(*jobs)
        deciders[pool_name([s.name for s in specs])] = _lookup(judged)
    calls.update(judge.calls)
    return deciders


def _lookup(judged: dict[str, ConsensusResult]) -> Decide:
    def decide(state: TraceState, _proposals: list[Proposal]) -> ConsensusResult:
        return judged[state.state_id]

    return decide
