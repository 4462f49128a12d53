"""What each teacher pool would have decided, from the answers a run already has. Pure.

Pure: states and the run's proposals in, counts and DPO rows out; no I/O, no calls. A state's
consensus comes from `consensus.methods.run_method` (or a judgement made beforehand) and its verdict
from `replay.decide.states.settle`, the functions `replay.run` decides with, so a pool's counts mean the
same as a run's, and the run's own pool gets the run's counts by construction.

A pool sees, per state, only the proposals of its teachers that are eligible there: same-family
exclusion is applied per state with `teachers.registry.split_by_family`, as in the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, computed_field

from consensus.intent_rules import IntentContext
from consensus.methods import run_method, student_match
from consensus.result import ConsensusResult
from consensus.validity import invalid_reasons, screen
from consensus.weighted import Weights
from ingestion.outcome import is_failed
from ingestion.schema import Action, Proposal, TraceState
from replay.ablation.pools import pool_name
from replay.decide.hindsight import Hindsight, hindsight_tier
from replay.decide.states import Settled, failed, settle
from replay.export.pairs import PromptMemo
from teachers.registry import TeacherSpec, split_by_family

Decide = Callable[[TraceState, list[Proposal]], ConsensusResult]

def pool_proposals(teachers: Sequence[TeacherSpec], state: TraceState,
                   answers: Mapping[str, Sequence[Proposal]], allow_same_family: bool
                   ) -> tuple[list[str], list[Proposal]]:
    """(teachers excluded at this state, the proposals of the eligible ones), as the run splits them.

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=Action(), student_model="claude-sonnet-4-5")
    >>> pool = [TeacherSpec(name="a", model="openai/a"), TeacherSpec(name="o", model="m", family="anthropic")]
    >>> answers = {"s": [Proposal(state_id="s", teacher=n, model="m") for n in "abo"]}
    >>> excluded, kept = pool_proposals(pool, s, answers, False); excluded, [p.teacher for p in kept]
    (['o'], ['a'])
    """
    eligible, excluded = split_by_family(teachers, state.student_model, allow_same_family)
    names = {t.name for t in eligible}
    return [t.name for t in excluded], [p for p in answers.get(state.state_id, ()) if p.teacher in names]


def method_decider(method: str, min_agreement: float, match: str = "intent",
                   weights: Weights | None = None) -> Decide:
    """A pure consensus method (`vote`, `similarity`, `weighted` with `weights`) as a `Decide`, with
    the state's cwd and history (the intent tier's context), as in the run.

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=Action())
    >>> method_decider("vote", 0.5)(s, []).reason
    'no_votes'
    """
    def decide(state: TraceState, proposals: list[Proposal]) -> ConsensusResult:
        cwd = state.metadata.get("cwd")
        return run_method(method, proposals, cwd, min_agreement, match, IntentContext(cwd, state.messages),
                          weights)

    return decide


class PoolCounts(BaseModel):
    """One pool's row. Each state is exactly one of: all teachers excluded, unanswered, abstained,
    agree, pair. `unanswered` (eligible teachers but not one answer) only happens with
    `--allow-missing` on an `--early-stop` run."""

    pool: str
    teachers: list[str]
    states: int = 0
    all_teachers_excluded: int = 0
    unanswered: int = 0
    abstained: int = 0
    agree: int = 0
    pairs: int = 0
    reached_exact: int = 0          # consensus reached at the exact tier
    reached_intent: int = 0         # ... only at the intent tier (`similar` clusters count here too)
    invalid: int = 0                # proposals screened out: a tool the state lacks, a missing argument
    excluded_same_family: dict[str, int] = Field(default_factory=dict)
    cost_usd: float = 0.0           # what the pool's answers cost when first made (cache hits included)
    jaccard: float | None = None    # of its pair state_ids with the full pool's
    hindsight: Hindsight = Field(default_factory=Hindsight)  # failed states: consensus vs recovery

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pairs_per_usd(self) -> float | None:
        return round(self.pairs / self.cost_usd, 4) if self.cost_usd > 0 else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usd_per_pair(self) -> float | None:
        return round(self.cost_usd / self.pairs, 6) if self.pairs else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def reached(self) -> int:
        return self.agree + self.pairs

    @computed_field  # type: ignore[prop-decorator]
    @property
    def voted(self) -> int:
        """States the pool decided on: reached or abstained."""
        return self.reached + self.abstained

    @computed_field  # type: ignore[prop-decorator]
    @property
    def consensus_rate(self) -> float:
        return _rate(self.reached, self.voted)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def abstain_rate(self) -> float:
        return _rate(self.abstained, self.voted)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def agree_rate(self) -> float:
        """How often the student did what the pool agreed on, over the states with a consensus."""
        return _rate(self.agree, self.reached)


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


@dataclass
class PoolResult:
    counts: PoolCounts
    rows: list[dict[str, Any]] = field(default_factory=list)
    pair_ids: frozenset[str] = frozenset()


_VERDICT_FIELD = {"all_teachers_excluded": "all_teachers_excluded", "abstained": "abstained",
                  "agree": "agree", "pair": "pairs", "failed": "unanswered"}  # failed: no usable answer


def _verdict(state: TraceState, proposals: list[Proposal], result: ConsensusResult, match: str) -> Settled:
    """`settle` without building the pair's row (counts only: Shapley values, sampled pools)."""
    if failed(proposals):
        return Settled("failed", None)
    if not result.reached or result.action is None:
        return Settled("abstained", None)
    cwd = state.metadata.get("cwd")
    student = student_match(state.student_action, result, cwd, match, IntentContext(cwd, state.messages))
    return Settled("agree" if student is not None else "pair", None, student)


def evaluate_pool(teachers: Sequence[TeacherSpec], states: Sequence[TraceState],
                  answers: Mapping[str, Sequence[Proposal]], decide: Decide,
                  allow_same_family: bool = False, memo: PromptMemo | None = None,
                  match: str = "intent", recoveries: Mapping[str, Action] | None = None,
                  rows: bool = True) -> PoolResult:
    """What the pool `teachers` decides at every state, from the answers it already has; with
    `recoveries` (failed state id → the student's recovery action, `replay.decide.hindsight`) its hindsight
    agreement too. `rows=False` counts without building the DPO rows.

    >>> from ingestion.schema import Action, ToolCall
    >>> bash = lambda cmd: Action(tool_calls=[ToolCall(id="1", name="Bash", arguments={"command": cmd})])
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", student_action=bash("ls"),
    ...                messages=[{"role": "user", "content": "hi"}], student_model="qwen3-coder")
    >>> answers = {"s": [Proposal(state_id="s", teacher=t, model=t, action=bash("pwd")) for t in "ab"]}
    >>> pool = [TeacherSpec(name=t, model=t) for t in "ab"]
    >>> result = evaluate_pool(pool, [s], answers, method_decider("vote", 0.5))
    >>> result.counts.pairs, result.counts.consensus_rate, sorted(result.pair_ids)
    (1, 1.0, ['s'])
    """
    names = [t.name for t in teachers]
    tally: Counter[str] = Counter()
    excluded: Counter[str] = Counter()
    out_rows: list[dict[str, Any]] = []
    pair_ids: list[str] = []
    cost = 0.0
    hindsight = Hindsight()
    recoveries = recoveries or {}
    for state in states:
        out, proposals = pool_proposals(teachers, state, answers, allow_same_family)
        excluded.update(out)
        was_failed = is_failed(state.metadata.get("outcome"))
        recovery = recoveries.get(state.state_id)
        if len(out) == len(names):
            tally["all_teachers_excluded"] += 1
            hindsight.add(was_failed, recovery is not None, False, None)
            continue
        if not proposals:
            tally["unanswered"] += 1
            hindsight.add(was_failed, recovery is not None, False, None)
            continue
        cost += sum(p.cost_usd for p in proposals)
        proposals = screen(proposals, state.tools)  # as the run does; answers asked here are new to it
        tally["invalid"] += sum(invalid_reasons(proposals).values())
        result = decide(state, proposals)
        settled = settle(state, proposals, result, memo, match) if rows else \
            _verdict(state, proposals, result, match)
        tally[_VERDICT_FIELD[settled.verdict]] += 1
        if settled.verdict in ("agree", "pair"):
            tally["reached_exact" if result.match in (None, "exact") else "reached_intent"] += 1
        if settled.verdict == "pair":
            pair_ids.append(state.state_id)
        if settled.row is not None:
            out_rows.append(settled.row)
        if was_failed:
            cwd = state.metadata.get("cwd")
            reached = settled.verdict in ("agree", "pair")
            tier = hindsight_tier(result, recovery, cwd, IntentContext(cwd, state.messages)) \
                if recovery is not None and reached else None
            hindsight.add(True, recovery is not None, reached, tier)
    counts = PoolCounts(pool=pool_name(names), teachers=names, states=len(states), **tally,
                        excluded_same_family=dict(sorted(excluded.items())), cost_usd=round(cost, 6),
                        hindsight=hindsight)
    return PoolResult(counts, out_rows, frozenset(pair_ids))


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets are identical (1.0).

    >>> jaccard({"s1", "s2"}, {"s2", "s3"}), jaccard(set(), set())
    (0.3333, 1.0)
    """
    union = len(a | b)
    return round(len(a & b) / union, 4) if union else 1.0
