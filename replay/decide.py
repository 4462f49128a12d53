"""The teacher half of a run: states → proposals → consensus → pairs, concurrently over states."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from consensus.methods import compare
from consensus.result import ConsensusResult
from ingestion.schema import Proposal, TraceState
from replay.ask import Answers, Judge, ask_state, decide
from replay.options import ConsensusOptions
from replay.pairs import PromptMemo, build_pair
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


Verdict = str  # "all_teachers_excluded" | "abstained" | "agree" | "pair"


def settle(state: TraceState, proposals: list[Proposal], result: ConsensusResult | None,
           memo: PromptMemo | None = None) -> tuple[Verdict, dict[str, Any] | None]:
    """A state's verdict from its proposals and consensus, and its DPO row when it is a pair.

    Shared by `replay.run` and `replay.ablate`, so a pool's counts mean the same in both.
    """
    if not proposals or result is None:
        return "all_teachers_excluded", None
    verdict = compare(state.student_action, result, state.metadata.get("cwd"))
    if verdict != "pair":
        return ("abstained" if verdict == "abstain" else verdict), None
    return "pair", build_pair(state, result, proposals, memo=memo)


async def replay_states(states: Iterable[TraceState], pool: TeacherPool, options: ConsensusOptions,
                        judge: Judge | None = None,
                        on_state: Callable[[], None] | None = None) -> Outcomes:
    """Ask, decide and pair every state. One trace's states are asked in turn order, each once the
    previous one's answers are in, so every request finds the one before it (which it extends) in the
    provider's prompt cache; different traces run concurrently, a bounded number at a time."""
    outcomes = Outcomes()
    slots = asyncio.Semaphore(max(pool.concurrency, 4))  # traces in flight
    done: dict[str, asyncio.Task[None]] = {}  # a trace's latest run, should its states come back later

    async def settle_state(index: int, state: TraceState, answers: Answers) -> None:
        try:
            outcomes.calls_saved += answers.calls_saved
            outcomes.usd_saved += answers.usd_saved
            outcomes.proposals[index] = answers.proposals
            result = await decide(state, answers.proposals, options, judge) if answers.proposals else None
            verdict, row = settle(state, answers.proposals, result)
            outcomes.verdicts[verdict] += 1
            if row is not None:
                outcomes.rows[index] = row
        finally:
            if on_state is not None:
                on_state()

    async def run_trace(queue: asyncio.Queue[tuple[int, TraceState] | None], after: asyncio.Task[None] | None,
                        group: asyncio.TaskGroup) -> None:
        try:
            if after is not None:
                await after
            while (item := await queue.get()) is not None:
                index, state = item
                answers = await ask_state(pool, state, options.early_stop, options.min_agreement)
                group.create_task(settle_state(index, state, answers))  # the judge need not hold the trace
        finally:
            slots.release()

    async with asyncio.TaskGroup() as group:
        trace_id, queue = None, None
        for index, state in enumerate(states):
            if state.trace_id != trace_id or queue is None:
                if queue is not None:
                    queue.put_nowait(None)
                await slots.acquire()
                trace_id, queue = state.trace_id, asyncio.Queue()
                done[trace_id] = group.create_task(run_trace(queue, done.get(trace_id), group))
            queue.put_nowait((index, state))
            await asyncio.sleep(0)  # reading the states file must not keep the calls waiting
        if queue is not None:
            queue.put_nowait(None)
    return outcomes
