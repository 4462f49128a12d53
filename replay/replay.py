"""The teacher half of a run: states → proposals → consensus → pairs, concurrently over states."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from consensus.methods import compare
from ingestion.schema import Proposal, TraceState
from replay.ask import Judge, ask_state, decide
from replay.options import ConsensusOptions
from replay.pairs import build_pair
from teachers.pool import TeacherPool


@dataclass
class Outcomes:
    """Per-state results, kept in input order so outputs are reproducible."""

    proposals: dict[int, list[Proposal]] = field(default_factory=dict)
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    verdicts: dict[str, int] = field(default_factory=lambda: {
        "all_teachers_excluded": 0, "abstained": 0, "agree": 0, "pair": 0})
    calls_saved: int = 0
    usd_saved: float = 0.0

    def ordered_proposals(self) -> list[Proposal]:
        return [p for i in sorted(self.proposals) for p in self.proposals[i]]

    def ordered_rows(self) -> list[dict[str, Any]]:
        return [self.rows[i] for i in sorted(self.rows)]


async def replay_states(states: Iterable[TraceState], pool: TeacherPool, options: ConsensusOptions,
                        judge: Judge | None = None,
                        on_state: Callable[[], None] | None = None) -> Outcomes:
    """Ask, decide and pair every state; a bounded window of states is in flight at once."""
    outcomes = Outcomes()
    window = asyncio.Semaphore(max(pool.concurrency * 2, 4))

    async def one(index: int, state: TraceState) -> None:
        try:
            answers = await ask_state(pool, state, options.early_stop, options.min_agreement)
            outcomes.calls_saved += answers.calls_saved
            outcomes.usd_saved += answers.usd_saved
            outcomes.proposals[index] = answers.proposals
            if not answers.proposals:
                outcomes.verdicts["all_teachers_excluded"] += 1
                return
            result = await decide(state, answers.proposals, options, judge)
            verdict = compare(state.student_action, result, state.metadata.get("cwd"))
            outcomes.verdicts["abstained" if verdict == "abstain" else verdict] += 1
            if verdict == "pair":
                outcomes.rows[index] = build_pair(state, result, answers.proposals)  # type: ignore[assignment]
        finally:
            window.release()
            if on_state is not None:
                on_state()

    async with asyncio.TaskGroup() as group:
        for index, state in enumerate(states):
            await window.acquire()
            group.create_task(one(index, state))
    return outcomes
