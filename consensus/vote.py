"""`vote`, the default method: the largest group of equivalent proposals, if it has a strict majority.

Tiers: the vote runs over canonical forms first (`exact`); when that abstains and `match` is
`intent` (the default), the same vote runs over intent keys (`consensus.intent`), where `cat a.py`
and `Read a.py` are one group. `match="exact"` stops after the first tier (the behaviour before tiers).

Rules, in order, at each tier:
1. No valid proposal → abstain (`no_votes`).
2. Groups are ranked by (-weight, key); a tie for first place abstains (`tie`) rather than let the
   sort order pick: a split pool is not a consensus.
3. The leader wins when its share of the voting teachers is strictly more than `min_agreement`
   (0.5 = strict majority; 2/3 demands more). Else abstain (`no_majority`).
The winner is always a real proposal: at the exact tier the member of the lowest (teacher, sample);
at the intent tier a member in the group's most common canonical spelling (ties the same way).
The result records the tier that decided (`match`) and, for each group, its tier.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from consensus.intent_rules import IntentContext
from consensus.result import (
    Ballot,
    ConsensusResult,
    abstain,
    ballot,
    exact_groups,
    key_groups,
    make_group,
    passes,
    representative,
    share,
    spoken_by,
    threshold,
)
from ingestion.schema import Proposal

TIERS = ("exact", "intent")


def check_match(match: str) -> str:
    """`exact` or `intent` (the loosest tier the consensus may use), else ValueError.

    >>> check_match("intent")
    'intent'
    """
    if match not in TIERS:
        raise ValueError(f"match must be one of {', '.join(TIERS)}, got {match!r}")
    return match


def _leader(ranked: list[tuple[str, Fraction, list[int]]], voters: int, min_agreement: float
            ) -> tuple[str | None, Fraction]:
    """(None if the leader wins, else why not; its share)."""
    if not ranked:
        return "no_votes", Fraction(0)
    agreement = share(ranked[0][1], voters)
    if len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
        return "tie", agreement
    return (None if passes(agreement, min_agreement) else "no_majority"), agreement


def _intent_tier(proposals: Sequence[Proposal], b: Ballot, context: IntentContext,
                 min_agreement: float) -> ConsensusResult:
    ranked = key_groups(b, b.intent_keys(context))
    speakers = [spoken_by(proposals, b, members) for _, _, members in ranked]
    groups = [make_group(proposals, b.forms[b.position(speaker)], weight, members, match="intent", intent=key)
              for (key, weight, members), speaker in zip(ranked, speakers, strict=True)]
    reason, agreement = _leader(ranked, len(b.voters), min_agreement)
    if reason is not None:
        return abstain("vote", reason, b.voters, groups, float(agreement))
    winner = speakers[0]
    return ConsensusResult(method="vote", reached=True, action=proposals[winner].action,
                           canonical=groups[0].canonical, agreement=float(agreement), teachers=b.voters,
                           winner_teachers=groups[0].teachers, groups=groups, match="intent",
                           intent=ranked[0][0])


def _count(keys: Sequence[str]) -> list[tuple[str, list[int]]]:
    """(key, vote positions) per key, ranked by (-votes, key): `key_groups` for unit weights."""
    members: dict[str, list[int]] = {}
    for position, key in enumerate(keys):
        found = members.get(key)
        if found is None:
            members[key] = [position]
        else:
            found.append(position)
    if len(members) == 1:
        return list(members.items())
    return sorted(members.items(), key=_rank)


def _rank(group: tuple[str, list[int]]) -> tuple[int, str]:
    return -len(group[1]), group[0]


def _counted_leader(ranked: list[tuple[str, list[int]]], voters: int, min_agreement: float
                    ) -> tuple[str | None, float]:
    """`_leader` over counts: the same decision and the same float agreement (an int quotient is
    rounded once, as float(Fraction) rounds the reduced one), without Fraction arithmetic."""
    if not ranked:
        return "no_votes", 0.0
    top = len(ranked[0][1])
    if len(ranked) > 1 and len(ranked[1][1]) == top:
        return "tie", top / voters
    least = threshold(min_agreement)
    passed = top * least.denominator > least.numerator * voters   # top / voters > least, in integers
    return (None if passed else "no_majority"), top / voters


def _counted(proposals: Sequence[Proposal], b: Ballot, min_agreement: float, match: str,
             context: IntentContext | None, cwd: str | None) -> ConsensusResult:
    """`vote` where every vote weighs 1 (one valid sample per teacher, the usual case): groups are
    counted, not summed as Fractions, and the result is validated once, groups and all, with the
    same fields set as the Fraction path's (tests/test_consensus_golden.py holds them equal)."""
    indices, forms, teachers = b.indices, b.forms, b.teachers
    ranked = _count(forms)
    reason, agreement = _counted_leader(ranked, len(indices), min_agreement)
    tier = "exact"
    if reason is not None and match == "intent" and ranked:
        tier, ranked = "intent", _count(b.intent_keys(context or IntentContext(cwd)))
        reason, agreement = _counted_leader(ranked, len(indices), min_agreement)
        speakers = [_speaker(proposals, b, members) for _, members in ranked]
        groups = [{"canonical": forms[speaker], "weight": float(len(members)),
                   "teachers": sorted([teachers[k] for k in members]),
                   "members": [indices[k] for k in members], "match": "intent", "intent": key}
                  for (key, members), speaker in zip(ranked, speakers, strict=True)]
    else:   # members ascending (positions are), teachers unique (one vote each): as make_group has them
        groups = [{"canonical": form, "weight": float(len(members)),
                   "teachers": sorted([teachers[k] for k in members]),
                   "members": [indices[k] for k in members]}
                  for form, members in ranked]
    if reason is not None:
        return ConsensusResult.model_validate({"method": "vote", "reached": False, "agreement": agreement,
                                               "teachers": b.voters, "groups": groups, "reason": reason})
    top = groups[0]
    result = {"method": "vote", "reached": True, "canonical": top["canonical"], "agreement": agreement,
              "teachers": b.voters, "winner_teachers": top["teachers"], "groups": groups, "match": tier}
    if tier == "intent":
        result["action"] = proposals[indices[speakers[0]]].action
        result["intent"] = ranked[0][0]
    else:
        result["action"] = proposals[representative(proposals, top["members"])].action
    return ConsensusResult.model_validate(result)


def _speaker(proposals: Sequence[Proposal], b: Ballot, members: list[int]) -> int:
    """`spoken_by` over vote positions: the position of a vote in the group's most common spelling."""
    if len(members) == 1:
        return members[0]
    forms = b.forms
    counts: dict[str, int] = {}
    for k in members:
        counts[forms[k]] = counts.get(forms[k], 0) + 1
    if len(counts) > 1:
        most = max(counts.values())
        members = [k for k in members if counts[forms[k]] == most]
    indices = b.indices
    return min(members, key=lambda k: (proposals[indices[k]].teacher, proposals[indices[k]].sample,
                                       indices[k]))


def vote(proposals: Sequence[Proposal], cwd: str | None = None, min_agreement: float = 0.5,
         match: str = "intent", context: IntentContext | None = None) -> ConsensusResult:
    """Majority vote over canonical forms, then (match="intent") over intent keys.

    `context` is the state's cwd and history (for the intent tier's new-file rule); without it the
    intent tier treats every whole-file write as one to a file the state has seen (exact).

    >>> from ingestion.schema import Action, ToolCall
    >>> bash = lambda t, cmd: Proposal(state_id="s", teacher=t, model=t,
    ...     action=Action(tool_calls=[ToolCall(id=t, name="Bash", arguments={"command": cmd})]))
    >>> r = vote([bash("a", "ls  -la"), bash("b", "ls -la"), bash("c", "pwd")])
    >>> r.reached, round(r.agreement, 3), r.winner_teachers, r.action.tool_calls[0].id, r.match
    (True, 0.667, ['a', 'b'], 'a', 'exact')
    >>> r = vote([bash("a", "ls -F"), bash("b", "ls -a"), bash("c", "ls -a"), bash("d", "pwd"),
    ...           bash("e", "git status")])   # 2 of 5 write `ls -a`, 3 of 5 list `.`
    >>> r.reached, r.match, r.agreement, r.action.tool_calls[0].arguments["command"]
    (True, 'intent', 0.6, 'ls -a')
    >>> vote([bash("a", "ls -F"), bash("b", "ls -a"), bash("c", "pwd")], match="exact").reason
    'tie'
    """
    if not 0 <= min_agreement < 1:
        raise ValueError(f"min_agreement must be in [0, 1), got {min_agreement}")
    check_match(match)
    b = ballot(proposals, cwd)
    if b.unit:
        return _counted(proposals, b, min_agreement, match, context, cwd)
    ranked = exact_groups(b)
    reason, agreement = _leader(ranked, len(b.voters), min_agreement)
    if reason is not None and match == "intent" and ranked:
        return _intent_tier(proposals, b, context or IntentContext(cwd), min_agreement)
    groups = [make_group(proposals, form, weight, members) for form, weight, members in ranked]
    if reason is not None:
        return abstain("vote", reason, b.voters, groups, float(agreement))
    form, _, members = ranked[0]
    winner = representative(proposals, members)
    return ConsensusResult(method="vote", reached=True, action=proposals[winner].action, canonical=form,
                           agreement=float(agreement), teachers=b.voters, winner_teachers=groups[0].teachers,
                           groups=groups, match="exact")
