"""The teacher half of a run: states → proposals → consensus → pairs, concurrently over states."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from consensus.intent_rules import IntentContext
from consensus.methods import run_method, student_match
from consensus.reliability import Reliability, dawid_skene, state_keys
from consensus.result import ConsensusResult
from consensus.validity import INVALID, invalid_reasons
from ingestion.outcome import is_failed
from ingestion.schema import Action, Proposal, TraceState
from replay.ask.answers import Answers, ask_state
from replay.ask.waves import AUTO_LIMIT, MARGIN, joins, prompt_size
from replay.decide.consensus import Judge, decide
from replay.decide.hindsight import Hindsight, hindsight_tier
from replay.decide.verdicts import verdict_record
from replay.export.pairs import PromptMemo, pair_row
from replay.options import ConsensusOptions
from teachers.pool import BUDGET_EXHAUSTED, TeacherPool
from teachers.workers import blocking


@dataclass
class Outcomes:
    """Per-state results, kept in input order so outputs are reproducible."""

    proposals: dict[int, list[Proposal]] = field(default_factory=dict)
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    decided: dict[int, dict[str, Any]] = field(default_factory=dict)   # verdicts.jsonl lines
    verdicts: dict[str, int] = field(default_factory=lambda: {
        "all_teachers_excluded": 0, "failed": 0, "abstained": 0, "agree": 0, "pair": 0})
    budget_stopped: int = 0  # of the failed states: those where --max-cost kept a call from being made
    tiers: Counter[str] = field(default_factory=Counter)    # consensus reached, by the tier that decided
    agree_tiers: Counter[str] = field(default_factory=Counter)  # student agreed, by tier
    invalid: Counter[str] = field(default_factory=Counter)  # proposals screened out, by reason
    calls_saved: int = 0
    usd_saved: float = 0.0
    # Hindsight: each failed state's (consensus, reached, context), until its recovery is known
    # (`finish_hindsight`, once every state is read: recoveries may not have been asked at all).
    failed_states: dict[str, tuple[ConsensusResult | None, bool, IntentContext]] = field(default_factory=dict)
    hindsight: Hindsight = field(default_factory=Hindsight)
    keys: dict[int, tuple[dict[str, str], str]] = field(default_factory=dict)  # weighted: vote keys
    reliability: Reliability | None = None  # weighted: the teachers' weights

    def ordered_proposals(self) -> list[Proposal]:
        return [p for i in sorted(self.proposals) for p in self.proposals[i]]

    def ordered_rows(self) -> list[dict[str, Any]]:
        return [self.rows[i] for i in sorted(self.rows)]

    def ordered_verdicts(self) -> list[dict[str, Any]]:
        return [self.decided[i] for i in sorted(self.decided)]


Verdict = str  # "all_teachers_excluded" | "failed" | "abstained" | "agree" | "pair"


class Settled(NamedTuple):
    verdict: Verdict
    row: dict[str, Any] | None
    student: str | None = None  # the tier at which the student agreed (agree only)


PAIRS_ONLY = frozenset({"pair"})


def settle(state: TraceState, proposals: list[Proposal], result: ConsensusResult | None,
           memo: PromptMemo | None = None, match: str = "intent", row: bool = True,
           keep: frozenset[str] = PAIRS_ONLY) -> Settled:
    """A state's verdict from its proposals and consensus, and its DPO row when it is a pair. The
    student is compared at the tiers `match` allows (`consensus.methods.student_match`). `row=False`
    decides without building the row (the view needs the verdict only).
    `keep`: the verdicts that get a row (`replay.export.formats.KEEP`: KTO and SFT also learn from
    `agree` states, KTO from `abstained` ones); beyond pairs, every row carries its `verdict`.

    `failed`: teachers were asked and not one usable answer came back, at least one of them for want
    of an answer (a call that failed, stayed malformed, or was not made for the budget): a re-run asks
    those again. A failure is no abstention. (Answers screened out as invalid are answers: when they
    are all there is, the state abstains.)
    Shared by `replay.run` and `replay.ablate`, so a pool's counts mean the same in both.

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=Action(content="x"))
    >>> settle(s, [Proposal(state_id="s", teacher="a", model="a", error="timeout: late")], None).verdict
    'failed'
    """
    if failed(proposals):
        return Settled("failed", None)
    if not proposals or result is None:
        return Settled("all_teachers_excluded", None)

    def built(verdict: str) -> dict[str, Any] | None:
        if not row or verdict not in keep:
            return None
        # An abstention has no consensus, even where the method named a candidate below the bar.
        judged = result.model_copy(update={"action": None}) if verdict == "abstained" else result
        pair = pair_row(state, judged, proposals, memo)  # type: ignore[union-attr]
        return pair if keep == PAIRS_ONLY else {**pair, "verdict": verdict}

    if not result.reached or result.action is None:
        return Settled("abstained", built("abstained"))
    cwd = state.metadata.get("cwd")
    student = student_match(state.student_action, result, cwd, match, IntentContext(cwd, state.messages))
    if student is not None:
        return Settled("agree", built("agree"), student)
    return Settled("pair", built("pair"))


def failed(proposals: list[Proposal]) -> bool:
    """No usable answer, and at least one proposal is a failure rather than a screened-out answer.

    >>> p = lambda error: Proposal(state_id="s", teacher="a", model="a", error=error)
    >>> failed([p("connection: refused"), p("invalid_proposal: unknown_tool: x")]), failed([])
    (True, False)
    >>> failed([p("invalid_proposal: unknown_tool: x")])
    False
    """
    return (all(p.action is None for p in proposals)
            and any(not (p.error or "").startswith(INVALID) for p in proposals))


def tier_counts(tiers: Counter[str], agree_tiers: Counter[str]) -> dict[str, int]:
    """report.json `consensus` keys beside reached/abstained: states reached at each tier
    (`exact`, `intent`; `similar` for similarity clusters), and agreements of the student by tier.

    >>> tier_counts(Counter(exact=3, intent=2), Counter(intent=1))
    {'exact': 3, 'intent': 2, 'agree_exact': 0, 'agree_intent': 1}
    """
    out = {"exact": tiers["exact"], "intent": tiers["intent"]}
    out.update({name: n for name, n in sorted(tiers.items()) if name not in out})
    out.update({"agree_exact": agree_tiers["exact"], "agree_intent": agree_tiers["intent"]})
    return out


def count(outcomes: Outcomes, settled: Settled, result: ConsensusResult | None,
          proposals: list[Proposal]) -> None:
    """Add one state's verdict, tier and screened proposals to the run's counts."""
    outcomes.verdicts[settled.verdict] += 1
    if settled.verdict == "failed" and any(p.error == BUDGET_EXHAUSTED for p in proposals):
        outcomes.budget_stopped += 1
    if settled.verdict in ("agree", "pair") and result is not None:
        outcomes.tiers[result.match or "exact"] += 1
    if settled.student is not None:
        outcomes.agree_tiers[settled.student] += 1
    outcomes.invalid.update(invalid_reasons(proposals))


def note_failed(outcomes: Outcomes, index: int, state: TraceState, result: ConsensusResult | None,
                settled: Settled) -> None:
    """Keep what hindsight needs of a failed state (`replay.decide.hindsight`) until its recovery is read."""
    if is_failed(state.metadata.get("outcome")):
        cwd = state.metadata.get("cwd")
        outcomes.failed_states[state.state_id] = (result, settled.verdict in ("agree", "pair"),
                                                  IntentContext(cwd, state.messages))


def finish_hindsight(outcomes: Outcomes, recoveries: Mapping[str, Action]) -> Hindsight:
    """report.json `hindsight`: each failed state's consensus against its recovery
    (`replay.decide.hindsight.read_recoveries`: failed state id → the student's recovery action)."""
    out = Hindsight()
    for state_id in sorted(outcomes.failed_states):
        result, reached, context = outcomes.failed_states[state_id]
        recovery = recoveries.get(state_id)
        tier = hindsight_tier(result, recovery, context.cwd, context) if recovery is not None and reached \
            else None
        out.add(True, recovery is not None, reached, tier)
    outcomes.hindsight = out
    return out


def settle_weighted(states: Iterable[TraceState], outcomes: Outcomes, options: ConsensusOptions,
                    pool: TeacherPool, keep: frozenset[str] = PAIRS_ONLY) -> None:
    """`--consensus weighted`, once every answer is in: each teacher's reliability (Dawid–Skene over
    the run's intent keys), then every state decided with those weights, in input order."""
    order = sorted(outcomes.keys)
    outcomes.reliability = dawid_skene([outcomes.keys[i][0] for i in order],
                                       [outcomes.keys[i][1] for i in order])
    weights = outcomes.reliability.weight
    for index, state in enumerate(states):
        proposals = outcomes.proposals.get(index, [])
        cwd = state.metadata.get("cwd")
        result = run_method("weighted", proposals, cwd, options.min_agreement, options.match,
                            IntentContext(cwd, state.messages), weights) if proposals else None
        settled = settle(state, proposals, result, match=options.match, keep=keep)
        count(outcomes, settled, result, proposals)
        note_failed(outcomes, index, state, result, settled)
        outcomes.decided[index] = verdict_record(state, settled.verdict, settled.student, result, proposals,
                                                 [t.name for t in pool.split(state)[1]])
        if settled.row is not None:
            outcomes.rows[index] = settled.row


async def replay_states(states: Iterable[TraceState], pool: TeacherPool, options: ConsensusOptions,
                        judge: Judge | None = None,
                        on_state: Callable[[], None] | None = None,
                        again: Callable[[], Iterable[TraceState]] | None = None,
                        keep: frozenset[str] = PAIRS_ONLY, trace_parallel: int | None = 1) -> Outcomes:
    """Ask, decide and pair every state. One trace's states are asked in turn order, each once the
    previous one's answers are in, so every request finds the one before it (which it extends) in the
    provider's prompt cache; different traces run concurrently, a bounded number at a time.
    `trace_parallel` K > 1: up to K states of a trace at once, in waves (replay.ask.waves); None: auto.
    `--consensus weighted` decides only once every answer is in, over the states read `again`."""
    outcomes = Outcomes()
    weighted = options.method == "weighted"
    if weighted and again is None:
        raise ValueError("--consensus weighted reads the states twice: pass `again`")
    limit, margin = (AUTO_LIMIT, MARGIN) if trace_parallel is None else (max(trace_parallel, 1), None)
    ratio = pool.cached_price_ratio()
    slots = asyncio.Semaphore(max(pool.concurrency, 4))  # traces in flight
    done: dict[str, asyncio.Task[None]] = {}  # a trace's latest run, should its states come back later

    async def settle_state(index: int, state: TraceState, answers: Answers) -> None:
        try:
            outcomes.calls_saved += answers.calls_saved
            outcomes.usd_saved += answers.usd_saved
            outcomes.proposals[index] = answers.proposals
            if weighted:  # decided once every answer is in: the weights come from all of them
                outcomes.keys[index] = state_keys(state, answers.proposals, options.match)
                return
            result = await decide(state, answers.proposals, options, judge) if answers.proposals else None
            settled = settle(state, answers.proposals, result, match=options.match, keep=keep)
            count(outcomes, settled, result, answers.proposals)
            note_failed(outcomes, index, state, result, settled)
            excluded = [t.name for t in pool.split(state)[1]]
            outcomes.decided[index] = await blocking(verdict_record, state, settled.verdict, settled.student,
                                                     result, answers.proposals, excluded)
            if settled.row is not None:
                outcomes.rows[index] = settled.row
        finally:
            if on_state is not None:
                on_state()

    async def run_trace(queue: asyncio.Queue[tuple[int, TraceState] | None], after: asyncio.Task[None] | None,
                        group: asyncio.TaskGroup) -> None:
        async def ask(index: int, state: TraceState) -> None:
            answers = await ask_state(pool, state, options.early_stop, options.min_agreement, options.match)
            group.create_task(settle_state(index, state, answers))  # the judge need not hold the trace

        try:
            if after is not None:
                await after
            base, first, held = 0, True, None
            while (item := held or await queue.get()) is not None:
                held, wave = None, [(item, await blocking(prompt_size, item[1]) if limit > 1 else 0)]
                # Waves (replay.ask.waves): the states already read join while the cost margin allows.
                while limit > 1 and not first and not queue.empty():
                    if (follower := queue.get_nowait()) is None:
                        queue.put_nowait(None)
                        break
                    size = await blocking(prompt_size, follower[1])
                    if not joins(base, [s for _, s in wave], size, limit, margin, ratio):
                        held = follower
                        break
                    wave.append((follower, size))
                await asyncio.gather(*(ask(*member) for member, _ in wave))
                base, first = wave[-1][1], False
        finally:
            slots.release()

    pending = iter(states)
    async with asyncio.TaskGroup() as group:
        trace_id, queue, index = None, None, 0
        # Each state is read (parsed from JSON) on a worker thread: the loop only schedules.
        while (state := await blocking(next, pending, None)) is not None:
            if state.trace_id != trace_id or queue is None:
                if queue is not None:
                    queue.put_nowait(None)
                await slots.acquire()
                trace_id, queue = state.trace_id, asyncio.Queue()
                done[trace_id] = group.create_task(run_trace(queue, done.get(trace_id), group))
            queue.put_nowait((index, state))
            index += 1
        if queue is not None:
            queue.put_nowait(None)
    if weighted and again is not None:
        await blocking(settle_weighted, again(), outcomes, options, pool, keep)
    return outcomes
