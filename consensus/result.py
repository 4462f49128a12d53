"""What every consensus method returns, and the vote weighting they share.

Votes: each valid proposal (action not None) is a vote; a failed or invalid one is not. With
`samples > 1` a teacher's votes are its valid samples, and they share one teacher's weight equally
(3 valid samples weigh 1/3 each). So every voting teacher weighs exactly 1, and "a strict majority
of the teachers that voted" keeps its meaning: a group wins when its weight is more than half the
number of voting teachers. With one sample per teacher, weights are plain counts. Weights are
exact fractions while deciding and floats in the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field, computed_field

from consensus.canonical import Canonical, canonical_parts
from consensus.intent import IntentKey, intent_of
from consensus.intent_rules import IntentContext
from ingestion.schema import Action, Proposal


class VoteGroup(BaseModel):
    """Proposals with one canonical form (`match` exact), one intent key (`match` intent: `canonical`
    is then its representative's form), or for `similarity` one cluster (`scores`: each member's
    similarity to the medoid, in `members` order)."""

    canonical: Canonical
    weight: float                      # teacher-weighted votes, see the module docstring
    teachers: list[str]                # sorted, unique
    members: list[int]                 # indices into the proposals list, ascending
    match: str = "exact"               # exact | intent | similar
    intent: IntentKey | None = None
    scores: list[float] = Field(default_factory=list)


class ConsensusResult(BaseModel):
    """The outcome for one state. `groups` is ranked, winner (if any) first."""

    method: str
    reached: bool
    action: Action | None = None       # the consensus action: the winning group's representative
    canonical: Canonical | None = None
    agreement: float = 0.0             # winning weight / voting teachers (0 when no votes)
    teachers: list[str] = Field(default_factory=list)         # teachers that voted, sorted
    winner_teachers: list[str] = Field(default_factory=list)  # teachers in the winning group, sorted
    groups: list[VoteGroup] = Field(default_factory=list)
    reason: str | None = None          # why it abstained: no_votes, no_majority, tie, judge_no_choice
    match: str | None = None           # the tier that decided: exact | intent (similarity: similar)
    intent: IntentKey | None = None    # the winning intent key, when the intent tier decided

    @computed_field  # type: ignore[prop-decorator]
    @property
    def votes(self) -> dict[str, float]:
        """Weight per canonical form."""
        return {group.canonical: group.weight for group in self.groups}


@dataclass
class Ballot:
    """The valid votes of one state, canonicalised once."""

    indices: list[int] = field(default_factory=list)         # proposal indices, ascending
    forms: list[Canonical] = field(default_factory=list)
    weights: list[Fraction] = field(default_factory=list)
    teachers: list[str] = field(default_factory=list)        # per vote
    voters: list[str] = field(default_factory=list)          # sorted unique
    parsed: list[dict[str, Any]] = field(default_factory=list)  # per vote, what `forms` encode
    intents: list[IntentKey] | None = None                   # per vote, once the intent tier needs them

    positions: dict[int, int] | None = None                 # proposal index → vote, once needed

    def position(self, index: int) -> int:
        """Where the vote of proposal `index` is in this ballot's lists."""
        if self.positions is None:
            self.positions = {i: k for k, i in enumerate(self.indices)}
        return self.positions[index]

    @property
    def unit(self) -> bool:
        """Every vote weighs 1 (one valid sample per teacher)."""
        return len(self.indices) == len(self.voters)

    def intent_keys(self, context: IntentContext) -> list[IntentKey]:
        """Each vote's intent key, computed once per distinct canonical form and kept."""
        if self.intents is None:
            memo: dict[Canonical, IntentKey] = {}
            parsed = self.parsed if len(self.parsed) == len(self.forms) else [None] * len(self.forms)
            self.intents = [memo[f] if f in memo else memo.setdefault(f, intent_of(f, context, p))
                            for f, p in zip(self.forms, parsed, strict=True)]
        return self.intents


_ONE = Fraction(1)
_COUNTS = [Fraction(n) for n in range(64)]   # group weights with one sample per teacher, made once


def ballot(proposals: Sequence[Proposal], cwd: str | None = None) -> Ballot:
    """Canonical forms and teacher weights of the valid proposals.

    >>> from ingestion.schema import Action
    >>> p = lambda t, s, text: Proposal(state_id="s", teacher=t, model=t, sample=s,
    ...     action=Action(content=text) if text else None)
    >>> b = ballot([p("a", 0, "x"), p("a", 1, "y"), p("b", 0, None)])
    >>> b.indices, [str(w) for w in b.weights], b.voters
    ([0, 1], ['1/2', '1/2'], ['a'])
    """
    result = Ballot()
    indices, forms, parsed, teachers = result.indices, result.forms, result.parsed, result.teachers
    for i, proposal in enumerate(proposals):
        action = proposal.action
        if action is not None:
            form, value = canonical_parts(action, cwd)
            indices.append(i)
            forms.append(form)
            parsed.append(value)
            teachers.append(proposal.teacher)
    voters = result.voters = sorted(set(teachers))
    if len(voters) == len(teachers):   # one valid sample per teacher: every vote weighs 1
        result.weights = [_ONE] * len(teachers)
    else:
        samples: dict[str, int] = defaultdict(int)
        for teacher in teachers:
            samples[teacher] += 1
        result.weights = [_ONE if samples[t] == 1 else Fraction(1, samples[t]) for t in teachers]
    return result


def representative(proposals: Sequence[Proposal], members: Sequence[int]) -> int:
    """The member that speaks for an exact group: lowest (teacher, sample, index), so reruns agree.

    >>> ps = [Proposal(state_id="s", teacher=t, model=t) for t in ["b", "a"]]
    >>> representative(ps, [0, 1])
    1
    """
    return min(members, key=lambda i: (proposals[i].teacher, proposals[i].sample, i))


def key_groups(b: Ballot, keys: Sequence[str]) -> list[tuple[str, Fraction, list[int]]]:
    """(key, weight, proposal indices) per key (one key per vote), ranked by (-weight, key).

    >>> b = Ballot(indices=[0, 1, 2], forms=["y", "x", "y"], weights=[Fraction(1)] * 3)
    >>> [(k, int(w), m) for k, w, m in key_groups(b, ["k", "k", "j"])]
    [('k', 2, [0, 1]), ('j', 1, [2])]
    """
    members: dict[str, list[int]] = defaultdict(list)
    if b.unit:  # one sample per teacher: every weight is 1, and counting is much cheaper than Fractions
        for index, key in zip(b.indices, keys, strict=True):
            members[key].append(index)
        ranked = sorted(members.items(), key=lambda g: (-len(g[1]), g[0]))
        return [(k, _COUNTS[len(m)] if len(m) < len(_COUNTS) else Fraction(len(m)), m) for k, m in ranked]
    weight: dict[str, Fraction] = defaultdict(Fraction)
    for index, key, w in zip(b.indices, keys, b.weights, strict=True):
        weight[key] += w
        members[key].append(index)
    return sorted(((k, weight[k], members[k]) for k in weight), key=lambda g: (-g[1], g[0]))


def exact_groups(b: Ballot) -> list[tuple[Canonical, Fraction, list[int]]]:
    """(form, weight, proposal indices) per canonical form, ranked by (-weight, form).

    >>> b = Ballot(indices=[0, 1, 2], forms=["y", "x", "y"], weights=[Fraction(1)] * 3)
    >>> [(f, int(w), m) for f, w, m in exact_groups(b)]
    [('y', 2, [0, 2]), ('x', 1, [1])]
    """
    return key_groups(b, b.forms)


def spoken_by(proposals: Sequence[Proposal], b: Ballot, members: Sequence[int]) -> int:
    """The member that speaks for an intent group: one in the group's most common canonical
    spelling (by weight), ties broken as in `representative`.

    >>> ps = [Proposal(state_id="s", teacher=t, model=t) for t in ["a", "b", "c"]]
    >>> spoken_by(ps, Ballot(indices=[0, 1, 2], forms=["ls", "ls -a", "ls -a"],
    ...                      weights=[Fraction(1)] * 3), [0, 1, 2])
    1
    """
    if len(members) == 1:
        return members[0]
    if b.unit:   # every weight is 1: count (Fractions cost more than the rest of this together)
        counts: dict[Canonical, int] = defaultdict(int)
        for index in members:
            counts[b.forms[b.position(index)]] += 1
        if len(counts) == 1:
            return representative(proposals, members)
        most = max(counts.values())
        return representative(proposals, [i for i in members if counts[b.forms[b.position(i)]] == most])
    weight: dict[Canonical, Fraction] = defaultdict(Fraction)
    for index in members:
        weight[b.forms[b.position(index)]] += b.weights[b.position(index)]
    if len(weight) == 1:
        return representative(proposals, members)
    top = max(weight.values())
    return representative(proposals, [i for i in members if weight[b.forms[b.position(i)]] == top])


def make_group(proposals: Sequence[Proposal], form: Canonical, weight: Fraction,
               members: list[int], **extra: Any) -> VoteGroup:
    """A VoteGroup from exact fractions (members sorted, teachers unique).

    >>> ps = [Proposal(state_id="s", teacher=t, model=t) for t in ["b", "a", "b"]]
    >>> make_group(ps, "x", Fraction(3, 2), [2, 1, 0]).model_dump(exclude={"scores", "intent"})
    {'canonical': 'x', 'weight': 1.5, 'teachers': ['a', 'b'], 'members': [0, 1, 2], 'match': 'exact'}
    """
    teachers = sorted({proposals[i].teacher for i in members})
    # numerator / denominator is what float(Fraction) computes, without its generic dispatch
    return VoteGroup(canonical=form, weight=weight.numerator / weight.denominator, teachers=teachers,
                     members=sorted(members), **extra)


def abstain(method: str, reason: str, voters: list[str], groups: list[VoteGroup],
            agreement: float = 0.0) -> ConsensusResult:
    """No consensus, with the votes kept for the report.

    >>> abstain("vote", "no_votes", [], []).reached
    False
    """
    return ConsensusResult(method=method, reached=False, agreement=agreement, teachers=voters,
                           groups=groups, reason=reason)


def share(weight: Fraction, voters: int) -> Fraction:
    """Winning weight over voting teachers, exactly; 0 with no voters.

    >>> share(Fraction(2), 3)
    Fraction(2, 3)
    """
    return weight / voters if voters else Fraction(0)


def passes(agreement: Fraction, min_agreement: float) -> bool:
    """Strictly more than `min_agreement`: 0.5 is a strict majority, 2 of 4 is not enough.

    >>> passes(Fraction(1, 2), 0.5), passes(Fraction(2, 3), 0.5)
    (False, True)
    """
    return agreement > threshold(min_agreement)


@lru_cache(maxsize=16)
def threshold(min_agreement: float) -> Fraction:
    """`min_agreement` as the exact fraction `passes` compares with (made once per value).

    >>> threshold(0.5), threshold(2 / 3) < Fraction(2, 3)
    (Fraction(1, 2), True)
    """
    return Fraction(min_agreement)
