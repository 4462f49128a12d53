"""What a student's log-likelihoods say about a set of preference pairs. Pure.

Per pair the scorer (`replay.train.scoring`) gives four log-likelihoods of a whole completion given its
prompt: the chosen and the rejected one, under the policy (the student being judged) and under the
reference (the untrained student). From them:

- **accuracy**: TRL's `rewards/accuracies`. A completion's reward is `beta * (log π(y|x) − log π_ref(y|x))`;
  a pair counts when the chosen one's reward is *strictly* above the rejected one's. Since the margin
  `log π(c) − log π(r) − (log π_ref(c) − log π_ref(r))` is how much the student's own log-odds of
  chosen over rejected moved away from the untrained student's, accuracy is the share of pairs where
  training moved the student toward the chosen answer. The untrained student (policy = reference) has
  every margin exactly 0: a tie, which counts as a miss, so its accuracy is 0.0 by construction; it
  means "no pair moved yet", not "the student prefers the rejected answer".
- **margin**: the mean of those margins, in nats (TRL's `rewards/margins` is `beta` times this).
- **likelihood accuracy**: the share of pairs where the policy itself gives the chosen completion the
  higher log-likelihood, no reference involved. A sum over tokens: it favours the shorter completion,
  so an untrained student's figure says which answers are shorter, not which it prefers.

Intervals are 95% Wilson score intervals on the share (`wilson`): exact enough at the tens of pairs
a held-out split holds, and never outside [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from replay.train.wilson import wilson


class PairScores(BaseModel):
    """The four log-likelihoods of one pair (nats, summed over the completion's tokens)."""

    chosen: float
    rejected: float
    ref_chosen: float
    ref_rejected: float

    @property
    def margin(self) -> float:
        return (self.chosen - self.ref_chosen) - (self.rejected - self.ref_rejected)


class Figures(BaseModel):
    """One set of pairs judged by one student (see the module docstring)."""

    pairs: int = 0
    accuracy: float | None = None
    interval: tuple[float, float] | None = None
    ties: int = 0                               # margin exactly 0: all of them for the untrained student
    margin: float | None = None                 # mean, nats
    likelihood_accuracy: float | None = None
    likelihood_interval: tuple[float, float] | None = None
    skipped: dict[str, int] = {}                # pairs left out, by reason (e.g. too_long)


def figures(scores: Sequence[PairScores], skipped: dict[str, int] | None = None) -> Figures:
    """The figures of a set of pairs from their scores.

    >>> s = [PairScores(chosen=-1, rejected=-3, ref_chosen=-2, ref_rejected=-2),
    ...      PairScores(chosen=-2, rejected=-1, ref_chosen=-2, ref_rejected=-1)]
    >>> f = figures(s)
    >>> f.accuracy, f.ties, f.margin, f.likelihood_accuracy
    (0.5, 1, 1.0, 0.5)
    """
    n = len(scores)
    if not n:
        return Figures(skipped=dict(skipped or {}))
    margins = [s.margin for s in scores]
    won = sum(m > 0 for m in margins)
    liked = sum(s.chosen > s.rejected for s in scores)
    return Figures(pairs=n, accuracy=round(won / n, 4), interval=wilson(won, n),
                   ties=sum(m == 0 for m in margins), margin=round(sum(margins) / n, 4),
                   likelihood_accuracy=round(liked / n, 4), likelihood_interval=wilson(liked, n),
                   skipped=dict(skipped or {}))
