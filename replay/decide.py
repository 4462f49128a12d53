"""The teacher half of a run: states → proposals → consensus → pairs, concurrently over states."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from consensus.methods import compare
from consensus.result import ConsensusResult
from ingestion.schema import Proposal, TraceState
from replay.ask import Judge, ask_state, decide
from replay.options import ConsensusOptions
from replay.pairs import PromptMemo, build_pair
from teachers.pool import BUDGET_EXHAUSTED, TeacherPool
from teachers.workers import blocking


@dataclass
class Outcomes:
    """Per-state results, kept in input order so outputs are reproducible."""

    proposals: dict[int, list[Proposal]] = field(default_factory=dict)
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    verdicts: dict[str, int] = field(default_factory=lambda: {
        "all_teachers_excluded": 0, "failed": 0, "abstained": 0, "agree": 0, "pair": 0})
    budget_stopped: int = 0  # of the failed states: those where --max-cost kept a call from being made
    calls_saved: int = 0
    usd_saved: float = 0.0

    def ordered_proposals(self) -> list[Proposal]:
        return [p for i in sorted(self.proposals) for p in self.proposals[i]]

    def ordered_rows(self) -> list[dict[str, Any]]:
        return [self.rows[i] for i in sorted(self.rows)]


Verdict = str  # "all_teachers_excluded" | "failed" | "abstained" | "agree" | "pair"


def settle(state: TraceState, proposals: list[Proposal], result: ConsensusResult | None,
           memo: PromptMemo | None = None) -> tuple[Verdict, dict[str, Any] | None]:
    """A state's verdict from its proposals and consensus, and its DPO row when it is a pair.

    `failed`: teachers were asked and not one gave a usable answer (every call failed, stayed
    malformed, or was not made for the budget); a re-run asks them again. A failure is no abstention.
    Shared by `replay.run` and `replay.ablate`, so a pool's counts mean the same in both.

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=Action(content="x"))
    >>> settle(s, [Proposal(state_id="s", teacher="a", model="a", error="timeout: late")], None)
    ('failed', None)
    """
    if proposals and all(p.action is None for p in proposals):
        return "failed", None
    if not proposals or result is None:
        return "all_teachers_excluded", None
    verdict = compare(state.student_action, result, state.metadata.get("cwd"))
    if verdict != "pair":
        return ("abstained" if verdict == "abstain" else verdict), None
    return "pair", build_pair(state, result, proposals, memo=memo)


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
            result = await decide(state, answers.proposals, options, judge) if answers.proposals else None
            verdict, row = settle(state, answers.proposals, result)
            outcomes.verdicts[verdict] += 1
            if verdict == "failed" and any(p.error == BUDGET_EXHAUSTED for p in answers.proposals):
                outcomes.budget_stopped += 1
            if row is not None:
                outcomes.rows[index] = row
        finally:
            window.release()
            if on_state is not None:
                on_state()

    # States are read (parsed from JSON) on a worker thread: the loop only schedules.
    pending = iter(states)
    async with asyncio.TaskGroup() as group:
        index = 0
        while (state := await blocking(next, pending, None)) is not None:
            await window.acquire()
            group.create_task(one(index, state))
            index += 1
    return outcomes
