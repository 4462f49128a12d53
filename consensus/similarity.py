"""`similarity`: proposals that are nearly the same count together; the cluster's medoid is the answer.

Similarity of two votes is rapidfuzz's normalised `ratio` of their canonical forms (1.0 when equal),
and 0 when they call different tools (or one is text): a Read and a Write of the same file are not
"nearly the same". A cluster is a vote with every vote at least `threshold` similar to it. The
heaviest cluster wins (ties broken by cohesion, then canonical form, then proposal index); an equally
heavy cluster sharing no vote with it is a tie and abstains. The medoid (most similar to the rest of
its cluster) is the consensus action. `min_agreement` applies to the cluster's weight as in `vote`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from rapidfuzz import fuzz

from consensus.canonical import shape
from consensus.result import (
    Ballot,
    ConsensusResult,
    VoteGroup,
    abstain,
    ballot,
    exact_groups,
    make_group,
    passes,
    share,
)
from ingestion.schema import Proposal


def similarity_matrix(forms: Sequence[str]) -> list[list[float]]:
    """Pairwise similarity in [0, 1]; 0 across different tool sequences.

    >>> forms = ['{"text":"abc"}', '{"text":"abd"}', '{"calls":[{"arguments":{},"name":"X"}]}']
    >>> [round(x, 3) for x in similarity_matrix(forms)[0]]
    [1.0, 0.929, 0.0]
    """
    shapes = [shape(form) for form in forms]
    n = len(forms)
    sim = [[1.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if forms[i] == forms[j]:
                value = 1.0
            elif shapes[i] != shapes[j]:
                value = 0.0
            else:
                value = fuzz.ratio(forms[i], forms[j]) / 100
            sim[i][j] = sim[j][i] = value
    return sim


def _clusters(b: Ballot, sim: list[list[float]], threshold: float) -> list[tuple[Fraction, float, int]]:
    """(weight, cohesion, centre) per vote, ranked best first."""
    scored = []
    for i in range(len(b.forms)):
        near = [j for j in range(len(b.forms)) if sim[i][j] >= threshold]
        scored.append((sum((b.weights[j] for j in near), Fraction(0)), sum(sim[i][j] for j in near), i))
    return sorted(scored, key=lambda s: (-s[0], -s[1], b.forms[s[2]], b.indices[s[2]]))


def similarity(proposals: Sequence[Proposal], cwd: str | None = None, min_agreement: float = 0.5,
               threshold: float = 0.9) -> ConsensusResult:
    """Cluster by similarity, take the heaviest cluster's medoid.

    >>> from ingestion.schema import Action
    >>> p = lambda t, text: Proposal(state_id="s", teacher=t, model=t, action=Action(content=text))
    >>> r = similarity([p("a", "The tests pass now."), p("b", "The tests pass now!"), p("c", "No.")])
    >>> r.reached, r.winner_teachers, r.action.content
    (True, ['a', 'b'], 'The tests pass now!')
    """
    if not 0 <= min_agreement < 1:
        raise ValueError(f"min_agreement must be in [0, 1), got {min_agreement}")
    b = ballot(proposals, cwd)
    if not b.forms:
        return abstain("similarity", "no_votes", b.voters, [])
    sim = similarity_matrix(b.forms)
    ranked = _clusters(b, sim, threshold)
    weight, _, centre = ranked[0]
    cluster = [j for j in range(len(b.forms)) if sim[centre][j] >= threshold]
    medoid = min(cluster, key=lambda m: (-sum(sim[m][j] for j in cluster), b.forms[m],
                                         b.teachers[m], proposals[b.indices[m]].sample, b.indices[m]))
    members = [b.indices[j] for j in cluster]
    groups = [make_group(proposals, b.forms[medoid], weight, members)] + _rest(proposals, b, set(cluster))
    agreement = share(weight, len(b.voters))
    rivals = (c for w, _, c in ranked[1:] if w == weight)
    if any(all(sim[c][j] < threshold for j in cluster) for c in rivals):
        return abstain("similarity", "tie", b.voters, groups, float(agreement))
    if not passes(agreement, min_agreement):
        return abstain("similarity", "no_majority", b.voters, groups, float(agreement))
    return ConsensusResult(method="similarity", reached=True, action=proposals[b.indices[medoid]].action,
                           canonical=b.forms[medoid], agreement=float(agreement), teachers=b.voters,
                           winner_teachers=groups[0].teachers, groups=groups)


def _rest(proposals: Sequence[Proposal], b: Ballot, taken: set[int]) -> list[VoteGroup]:
    """Exact groups of the votes outside the winning cluster, for the report."""
    left = [k for k in range(len(b.forms)) if k not in taken]
    rest = Ballot(indices=[b.indices[k] for k in left], forms=[b.forms[k] for k in left],
                  weights=[b.weights[k] for k in left])
    return [make_group(proposals, f, w, m) for f, w, m in exact_groups(rest)]
