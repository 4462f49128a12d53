"""Stop asking teachers once the rest cannot change what `vote` decides; ask the cheap ones first.

`decided` assumes one vote per teacher (samples=1) and `vote`'s rules: a group wins with strictly
more than `min_agreement` of the voting teachers and no tie for first. A teacher still to answer
may vote for any group (or a new one) or fail (no vote). It returns True only when every such
future gives the same outcome: the same winner, or abstention. When unsure it says False, which
only costs a call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from fractions import Fraction

from consensus.canonical import Canonical


def _can_win(count: int, votes: int, remaining: int, threshold: Fraction) -> bool:
    # A group's best future is every remaining teacher joining it: (c + r) / (v + r) only grows with
    # each valid vote it gets, and failures never help it more than joining would.
    return Fraction(count + remaining, votes + remaining) > threshold if votes + remaining else False


def decided(votes_so_far: Sequence[Canonical | None], remaining: int, min_agreement: float = 0.5) -> bool:
    """True when the remaining teachers can no longer change the outcome.

    >>> decided(["ls", "ls"], remaining=1)          # 2 of 3 agree: the third cannot undo it
    True
    >>> decided(["ls", "pwd"], remaining=1)         # the third decides
    False
    >>> decided(["ls", "pwd", "cat"], remaining=1)  # nobody can reach 3 of 4
    True
    >>> decided([None, None], remaining=0)          # nothing left and no votes: abstain
    True
    """
    threshold = Fraction(min_agreement)
    counts = Counter(v for v in votes_so_far if v is not None)
    votes = sum(counts.values())
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if ranked:
        lead = ranked[0][1]
        rival = ranked[1][1] if len(ranked) > 1 else 0
        # Worst case for the leader: every remaining teacher votes, all for its strongest rival.
        if Fraction(lead, votes + remaining) > threshold and lead > rival + remaining:
            return True
    # Decided abstention: no group, old or new, can reach the threshold in any future.
    candidates = [count for _, count in ranked] + [0]
    return not any(_can_win(count, votes, remaining, threshold) for count in candidates)


def order_by_cost(teachers: Sequence[str], cost_fn: Callable[[str], float]) -> list[str]:
    """Cheapest first; equal costs keep the given order (a stable sort), so the order is reproducible.

    >>> order_by_cost(["gpt-5", "deepseek", "qwen"], {"gpt-5": 10.0, "deepseek": 1.0, "qwen": 1.0}.get)
    ['deepseek', 'qwen', 'gpt-5']
    """
    return sorted(teachers, key=cost_fn)
