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

from pydantic import BaseModel, Field, computed_field

from consensus.canonical import Canonical, canonical
from ingestion.schema import Action, Proposal


class VoteGroup(BaseModel):
    """Proposals with one canonical form (or, for `similarity`, one cluster)."""

    canonical: Canonical
    weight: float                      # teacher-weighted votes, see the module docstring
    teachers: list[str]                # sorted, unique
    members: list[int]                 # indices into the proposals list, ascending


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


def ballot(proposals: Sequence[Proposal], cwd: str | None = None) -> Ballot:
    """Canonical forms and teacher weights of the valid proposals.

    >>> from ingestion.schema import Action
    >>> p = lambda t, s, text: Proposal(state_id="s", teacher=t, model=t, sample=s,
    ...     action=Action(content=text) if text else None)
    >>> b = ballot([p("a", 0, "x"), p("a", 1, "y"), p("b", 0, None)])
    >>> b.indices, [str(w) for w in b.weights], b.voters
    ([0, 1], ['1/2', '1/2'], ['a'])
    """
    valid = [i for i, p in enumerate(proposals) if p.action is not None]
    samples: dict[str, int] = defaultdict(int)
    for i in valid:
        samples[proposals[i].teacher] += 1
    result = Ballot(voters=sorted(samples))
    for i in valid:
        proposal = proposals[i]
        result.indices.append(i)
        result.forms.append(canonical(proposal.action, cwd))  # type: ignore[arg-type]
        result.weights.append(Fraction(1, samples[proposal.teacher]))
        result.teachers.append(proposal.teacher)
    return result


def representative(proposals: Sequence[Proposal], members: Sequence[int]) -> int:
    """The member that speaks for an exact group: lowest (teacher, sample, index), so reruns agree.

    >>> ps = [Proposal(state_id="s", teacher=t, model=t) for t in ["b", "a"]]
    >>> representative(ps, [0, 1])
    1
    """
    return min(members, key=lambda i: (proposals[i].teacher, proposals[i].sample, i))


def exact_groups(b: Ballot) -> list[tuple[Canonical, Fraction, list[int]]]:
    """(form, weight, proposal indices) per canonical form, ranked by (-weight, form).

    >>> b = Ballot(indices=[0, 1, 2], forms=["y", "x", "y"], weights=[Fraction(1)] * 3)
    >>> [(f, int(w), m) for f, w, m in exact_groups(b)]
    [('y', 2, [0, 2]), ('x', 1, [1])]
    """
    weight: dict[Canonical, Fraction] = defaultdict(Fraction)
    members: dict[Canonical, list[int]] = defaultdict(list)
    for index, form, w in zip(b.indices, b.forms, b.weights, strict=True):
        weight[form] += w
        members[form].append(index)
    return sorted(((f, weight[f], members[f]) for f in weight), key=lambda g: (-g[1], g[0]))


def make_group(proposals: Sequence[Proposal], form: Canonical, weight: Fraction,
               members: list[int]) -> VoteGroup:
    """A VoteGroup from exact fractions (members sorted, teachers unique).

    >>> ps = [Proposal(state_id="s", teacher=t, model=t) for t in ["b", "a", "b"]]
    >>> make_group(ps, "x", Fraction(3, 2), [2, 1, 0]).model_dump()
    {'canonical': 'x', 'weight': 1.5, 'teachers': ['a', 'b'], 'members': [0, 1, 2]}
    """
    teachers = sorted({proposals[i].teacher for i in members})
    return VoteGroup(canonical=form, weight=float(weight), teachers=teachers, members=sorted(members))


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
    return agreement > Fraction(min_agreement)
