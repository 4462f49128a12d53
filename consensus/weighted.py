"""`weighted`: `vote` with each teacher's vote weighed by its reliability (`consensus.reliability`).

The same tiers and rules as `consensus.vote`, with weights: at the exact tier, then (match="intent")
the intent tier, the group with the largest total weight wins when it holds strictly more than
`min_agreement` of the weight of the teachers that voted, and no other group has as much (a tie
abstains). A teacher's weight is its reliability (a probability, so every weight is positive and a
lone voter still wins); with `samples > 1` its valid samples share it equally, as in `vote`. Weights
are exact fractions (limited to 6 decimals) so ties and thresholds do not depend on float rounding.
`agreement` is the winning group's share of the weight. With equal weights this is `vote`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

from consensus.intent_rules import IntentContext
from consensus.result import (
    Ballot,
    ConsensusResult,
    abstain,
    ballot,
    make_group,
    representative,
    spoken_by,
)
from consensus.vote import check_match
from ingestion.schema import Proposal

Weights = Mapping[str, float] | Callable[[str], float]


def _weight_of(weights: Weights) -> Callable[[str], Fraction]:
    get = weights if callable(weights) else (lambda t: weights.get(t, 0.5))
    return lambda t: Fraction(max(float(get(t)), 1e-6)).limit_denominator(1_000_000)


def _groups(b: Ballot, keys: Sequence[str], weight: Callable[[str], Fraction]
            ) -> list[tuple[str, Fraction, list[int]]]:
    total: dict[str, Fraction] = defaultdict(Fraction)
    members: dict[str, list[int]] = defaultdict(list)
    for index, key, teacher, share in zip(b.indices, keys, b.teachers, b.weights, strict=True):
        total[key] += weight(teacher) * share
        members[key].append(index)
    return sorted(((k, total[k], members[k]) for k in total), key=lambda g: (-g[1], g[0]))


def _leader(ranked: list[tuple[str, Fraction, list[int]]], min_agreement: float
            ) -> tuple[str | None, Fraction]:
    if not ranked:
        return "no_votes", Fraction(0)
    agreement = ranked[0][1] / sum(w for _, w, _ in ranked)
    if len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
        return "tie", agreement
    # The threshold as the decimal it was written as: 3/5 of the weight is not more than 0.6 (a float
    # 0.6 is a hair below 3/5, which `consensus.result.passes` compares against).
    return (None if agreement > Fraction(str(min_agreement)) else "no_majority"), agreement


def weighted(proposals: Sequence[Proposal], weights: Weights, cwd: str | None = None,
             min_agreement: float = 0.5, match: str = "intent",
             context: IntentContext | None = None) -> ConsensusResult:
    """Reliability-weighted vote over canonical forms, then (match="intent") over intent keys.

    >>> from ingestion.schema import Action, ToolCall
    >>> bash = lambda t, cmd: Proposal(state_id="s", teacher=t, model=t,
    ...     action=Action(tool_calls=[ToolCall(id=t, name="Bash", arguments={"command": cmd})]))
    >>> r = weighted([bash("a", "ls"), bash("c", "pwd")], {"a": 0.9, "c": 0.4})
    >>> r.reached, r.winner_teachers, round(r.agreement, 3), r.method   # a tie for `vote`
    (True, ['a'], 0.692, 'weighted')
    >>> weighted([bash("a", "ls"), bash("c", "pwd")], {"a": 0.5, "c": 0.5}).reason
    'tie'
    """
    if not 0 <= min_agreement < 1:
        raise ValueError(f"min_agreement must be in [0, 1), got {min_agreement}")
    check_match(match)
    weight = _weight_of(weights)
    b = ballot(proposals, cwd)
    ranked = _groups(b, b.forms, weight)
    reason, agreement = _leader(ranked, min_agreement)
    tier = "exact"
    speakers = [representative(proposals, members) for _, _, members in ranked]
    groups = [make_group(proposals, form, w, members) for form, w, members in ranked]
    if reason is not None and match == "intent" and ranked:
        keys = b.intent_keys(context or IntentContext(cwd))
        ranked = _groups(b, keys, weight)
        reason, agreement = _leader(ranked, min_agreement)
        tier = "intent"
        speakers = [spoken_by(proposals, b, members) for _, _, members in ranked]
        groups = [make_group(proposals, b.forms[b.position(s)], w, members, match="intent", intent=key)
                  for (key, w, members), s in zip(ranked, speakers, strict=True)]
    if reason is not None:
        return abstain("weighted", reason, b.voters, groups, float(agreement))
    return ConsensusResult(method="weighted", reached=True, action=proposals[speakers[0]].action,
                           canonical=groups[0].canonical, agreement=float(agreement), teachers=b.voters,
                           winner_teachers=groups[0].teachers, groups=groups, match=tier,
                           intent=ranked[0][0] if tier == "intent" else None)
