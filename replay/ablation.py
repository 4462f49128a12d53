"""Teacher-pool ablations, computed: which pools to try, and what each pool would have decided.

Pure: states and the run's proposals in, counts and DPO rows out; no I/O, no calls. A state's
consensus comes from `consensus.methods.run_method` (or a judgement made beforehand) and its verdict
from `replay.replay.settle`, the functions `replay.run` decides with, so a pool's counts mean the
same as a run's, and the run's own pool gets the run's counts by construction.

A pool sees, per state, only the proposals of its teachers that are eligible there: same-family
exclusion is applied per state with `teachers.registry.split_by_family`, as in the run.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from pydantic import BaseModel, Field, computed_field

from consensus.methods import run_method
from consensus.result import ConsensusResult
from ingestion.schema import Proposal, ReplayError, TraceState
from replay.pairs import PromptMemo
from replay.replay import settle
from teachers.registry import TeacherSpec, split_by_family

MAX_SUBSET_TEACHERS = 8  # --all-subsets: 2^8 - 1 = 255 pools, each a dataset; beyond that, name the pools
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
_MAX_DIRNAME = 120

Decide = Callable[[TraceState, list[Proposal]], ConsensusResult]


class AblationError(ReplayError):
    """A pool that cannot be computed from the run as asked (unknown teacher, missing answers, ...)."""


def pool_name(teachers: Sequence[str]) -> str:
    """A pool's name: its teachers joined by `+`.

    >>> pool_name(["gpt-5", "deepseek"])
    'gpt-5+deepseek'
    """
    return "+".join(teachers)


def pool_dirname(teachers: Sequence[str]) -> str:
    """A folder name for a pool, safe on any filesystem; a name that had to change gets a short hash,
    so two pools never share a folder.

    >>> pool_dirname(["gpt-5", "deepseek"]), pool_dirname(["openrouter/qwen/qwen3-coder"])
    ('gpt-5+deepseek', 'openrouter_qwen_qwen3-coder-ef13f0')
    """
    name = pool_name(teachers)
    safe = _UNSAFE.sub("_", name).strip("._") or "pool"
    if safe == name and len(name) <= _MAX_DIRNAME:
        return name
    return f"{safe[:_MAX_DIRNAME]}-{hashlib.sha256(name.encode()).hexdigest()[:6]}"


def split_pools(text: str) -> list[list[str]]:
    """`--pools "a,b;a;b"` → one list of entries per pool (empty pools dropped).

    >>> split_pools("gpt-5, deepseek; gpt-5 ;; deepseek")
    [['gpt-5', 'deepseek'], ['gpt-5'], ['deepseek']]
    """
    pools = [[entry.strip() for entry in group.split(",") if entry.strip()] for group in text.split(";")]
    return [pool for pool in pools if pool]


def all_subsets(teachers: Sequence[str]) -> list[tuple[str, ...]]:
    """Every non-empty subset, largest first, each in the given teacher order.

    >>> all_subsets(["a", "b", "c"])
    [('a', 'b', 'c'), ('a', 'b'), ('a', 'c'), ('b', 'c'), ('a',), ('b',), ('c',)]
    """
    if len(teachers) > MAX_SUBSET_TEACHERS:
        raise AblationError(f"--all-subsets with {len(teachers)} teachers makes {2 ** len(teachers) - 1} "
                            f"pools; at most {MAX_SUBSET_TEACHERS} teachers: name the pools with --pools "
                            f"or use --leave-one-out")
    return [combo for size in range(len(teachers), 0, -1) for combo in combinations(teachers, size)]


def leave_one_out(teachers: Sequence[str]) -> list[tuple[str, ...]]:
    """The full pool, then the pool without each teacher in turn (an empty pool is skipped).

    >>> leave_one_out(["a", "b", "c"])
    [('a', 'b', 'c'), ('b', 'c'), ('a', 'c'), ('a', 'b')]
    """
    rest = [tuple(t for t in teachers if t != left) for left in teachers]
    return [tuple(teachers), *(pool for pool in rest if pool)]


def unique_pools(full: Sequence[str], pools: Iterable[Sequence[str]]) -> list[tuple[str, ...]]:
    """The full pool first, then each other pool once (a pool is a set: `b,a` is `a,b`), teachers in
    the full pool's order, teachers new to it after, in the order given.

    >>> unique_pools(["a", "b"], [["b", "a"], ["x", "a"], ["a", "x"], ["b"]])
    [('a', 'b'), ('a', 'x'), ('b',)]
    """
    rank = {name: i for i, name in enumerate(full)}
    out, seen = [tuple(full)], {frozenset(full)}
    for pool in pools:
        members = list(dict.fromkeys(pool))
        ordered = tuple(sorted(members, key=lambda t: (rank.get(t, len(rank)), members.index(t))))
        if frozenset(ordered) not in seen:
            seen.add(frozenset(ordered))
            out.append(ordered)
    return out


def index_answers(proposals: Iterable[Proposal]) -> dict[str, list[Proposal]]:
    """Proposals by state_id, in the order given (the run's order, which tie-breaks may depend on).

    >>> p = lambda s, t: Proposal(state_id=s, teacher=t, model=t)
    >>> answers = index_answers([p("s1", "a"), p("s2", "a"), p("s1", "b")])
    >>> {k: [x.teacher for x in v] for k, v in answers.items()}
    {'s1': ['a', 'b'], 's2': ['a']}
    """
    out: dict[str, list[Proposal]] = {}
    for proposal in proposals:
        out.setdefault(proposal.state_id, []).append(proposal)
    return out


def missing_answers(states: Sequence[TraceState], answers: Mapping[str, Sequence[Proposal]],
                    teachers: Sequence[TeacherSpec], samples: int, allow_same_family: bool
                    ) -> list[tuple[int, TeacherSpec, int]]:
    """(state index, teacher, sample) of every answer an eligible teacher owes and `answers` lacks:
    teachers new to the run, and those an `--early-stop` run never asked. State-major order.

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=Action(), student_model="claude-sonnet-4-5")
    >>> pool = [TeacherSpec(name="a", model="openai/a"), TeacherSpec(name="b", model="openai/b"),
    ...         TeacherSpec(name="opus", model="claude-opus-4", family="anthropic")]
    >>> [(i, t.name, k) for i, t, k in missing_answers([s], {"s": [Proposal(state_id="s", teacher="a",
    ...     model="openai/a")]}, pool, 1, False)]
    [(0, 'b', 0)]
    """
    out = []
    for index, state in enumerate(states):
        have = {(p.teacher, p.sample) for p in answers.get(state.state_id, ())}
        eligible, _ = split_by_family(teachers, state.student_model, allow_same_family)
        out += [(index, t, k) for t in eligible for k in range(samples) if (t.name, k) not in have]
    return out


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


def method_decider(method: str, min_agreement: float) -> Decide:
    """A pure consensus method (`vote`, `similarity`) as a `Decide`, with the state's cwd, as in the run.

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=Action())
    >>> method_decider("vote", 0.5)(s, []).reason
    'no_votes'
    """
    def decide(state: TraceState, proposals: list[Proposal]) -> ConsensusResult:
        return run_method(method, proposals, state.metadata.get("cwd"), min_agreement)

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
    excluded_same_family: dict[str, int] = Field(default_factory=dict)
    cost_usd: float = 0.0           # what the pool's answers cost when first made (cache hits included)
    jaccard: float | None = None    # of its pair state_ids with the full pool's

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
                  "agree": "agree", "pair": "pairs"}


def evaluate_pool(teachers: Sequence[TeacherSpec], states: Sequence[TraceState],
                  answers: Mapping[str, Sequence[Proposal]], decide: Decide,
                  allow_same_family: bool = False, memo: PromptMemo | None = None) -> PoolResult:
    """What the pool `teachers` decides at every state, from the answers it already has.

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
    rows: list[dict[str, Any]] = []
    cost = 0.0
    for state in states:
        out, proposals = pool_proposals(teachers, state, answers, allow_same_family)
        excluded.update(out)
        if len(out) == len(names):
            tally["all_teachers_excluded"] += 1
            continue
        if not proposals:
            tally["unanswered"] += 1
            continue
        cost += sum(p.cost_usd for p in proposals)
        verdict, row = settle(state, proposals, decide(state, proposals), memo)
        tally[_VERDICT_FIELD[verdict]] += 1
        if row is not None:
            rows.append(row)
    counts = PoolCounts(pool=pool_name(names), teachers=names, states=len(states), **tally,
                        excluded_same_family=dict(sorted(excluded.items())), cost_usd=round(cost, 6))
    return PoolResult(counts, rows, frozenset(row["state_id"] for row in rows))


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets are identical (1.0).

    >>> jaccard({"s1", "s2"}, {"s2", "s3"}), jaccard(set(), set())
    (0.3333, 1.0)
    """
    union = len(a | b)
    return round(len(a & b) / union, 4) if union else 1.0
