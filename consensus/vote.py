"""`vote`, the default method: the largest group of equivalent proposals, if it has a strict majority.

Rules, in order:
1. No valid proposal → abstain (`no_votes`).
2. Groups are ranked by (-weight, canonical form); a tie for first place abstains (`tie`) rather
   than let the sort order pick: a split pool is not a consensus.
3. The leader wins when its share of the voting teachers is strictly more than `min_agreement`
   (0.5 = strict majority; 2/3 demands more). Else abstain (`no_majority`).
The winning action is the group member of the lowest (teacher, sample), so reruns pick the same one.
"""

from __future__ import annotations

from collections.abc import Sequence

from consensus.result import (
    ConsensusResult,
    abstain,
    ballot,
    exact_groups,
    make_group,
    passes,
    representative,
    share,
)
from ingestion.schema import Proposal


def vote(proposals: Sequence[Proposal], cwd: str | None = None,
         min_agreement: float = 0.5) -> ConsensusResult:
    """Majority vote over canonical forms.

    >>> from ingestion.schema import Action, ToolCall
    >>> bash = lambda t, cmd: Proposal(state_id="s", teacher=t, model=t,
    ...     action=Action(tool_calls=[ToolCall(id=t, name="Bash", arguments={"command": cmd})]))
    >>> r = vote([bash("a", "ls  -la"), bash("b", "ls -la"), bash("c", "pwd")])
    >>> r.reached, round(r.agreement, 3), r.winner_teachers, r.action.tool_calls[0].id
    (True, 0.667, ['a', 'b'], 'a')
    """
    if not 0 <= min_agreement < 1:
        raise ValueError(f"min_agreement must be in [0, 1), got {min_agreement}")
    b = ballot(proposals, cwd)
    ranked = exact_groups(b)
    groups = [make_group(proposals, form, weight, members) for form, weight, members in ranked]
    if not ranked:
        return abstain("vote", "no_votes", b.voters, groups)
    form, weight, members = ranked[0]
    agreement = share(weight, len(b.voters))
    if len(ranked) > 1 and ranked[1][1] == weight:
        return abstain("vote", "tie", b.voters, groups, float(agreement))
    if not passes(agreement, min_agreement):
        return abstain("vote", "no_majority", b.voters, groups, float(agreement))
    winner = representative(proposals, members)
    return ConsensusResult(method="vote", reached=True, action=proposals[winner].action, canonical=form,
                           agreement=float(agreement), teachers=b.voters,
                           winner_teachers=groups[0].teachers, groups=groups)
