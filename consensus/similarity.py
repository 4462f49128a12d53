"""`similarity`: proposals that are nearly the same count together; the cluster's medoid is the answer.

Similarity of two votes compares what the calls do, never the JSON around them: 0 when they call
different tools (or one is text), else the mean over their calls (paired by tool name) of the mean
over argument names of how alike the two values are. A shell command is compared token by token
(shlex words: `create reproduce.java` and `create reproduce.py` share one token of two, 0.5; the whole
JSON scored them 0.96), a path part by part (`tests/a.py` and `tests/b.py`: 0.5), other text
character by character (rapidfuzz's normalised Indel similarity), anything else equal or not; an
argument one side lacks scores 0. Text answers compare their folded text character by character.

The threshold (0.9 by default) is the least similarity to a cluster's centre: on average 9 in 10
tokens of a command, parts of a path, or characters of an edit alike. A cluster is a vote with every
vote at least `threshold` similar to it. The heaviest cluster wins (ties broken by cohesion, then
canonical form, then proposal index); an equally heavy cluster sharing no vote with it is a tie and
abstains. The medoid (most similar to the rest of its cluster) is the consensus action; the group
keeps each member's score against it. `min_agreement` applies to the cluster's weight as in `vote`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

from rapidfuzz.distance import Indel

from consensus.canonical import load_rules
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


@lru_cache(maxsize=4096)
def _words(command: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(command))
    except ValueError:  # an unbalanced quote: plain words are still a fair comparison
        return tuple(command.split())


def value_similarity(kind: str, a: Any, b: Any) -> float:
    """How alike two argument values are, in [0, 1]; `kind` is command, path or text.

    >>> value_similarity("command", "create reproduce.java", "create reproduce.py")
    0.5
    >>> value_similarity("path", "tests/a.py", "tests/b.py"), value_similarity("text", "abc", "abd")
    (0.5, 0.6666666666666667)
    """
    if a == b:
        return 1.0
    if not isinstance(a, str) or not isinstance(b, str):
        return 0.0
    if kind == "command":
        return Indel.normalized_similarity(_words(a), _words(b))
    if kind == "path":
        return Indel.normalized_similarity(a.split("/"), b.split("/"))
    return Indel.normalized_similarity(a, b)


def call_similarity(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Two canonical calls (`{"name", "arguments"}`): 0 for different tools, else the mean value similarity.

    >>> call_similarity({"name": "Read", "arguments": {"file_path": "a.py"}},
    ...                 {"name": "Read", "arguments": {"file_path": "a.py", "offset": 10}})
    0.5
    """
    if a["name"] != b["name"]:
        return 0.0
    rule = load_rules().for_tool(a["name"])
    keys = a["arguments"].keys() | b["arguments"].keys()
    if not keys:
        return 1.0
    total = 0.0
    for key in keys:
        kind = "command" if key in rule.commands else "path" if key in rule.paths else "text"
        total += value_similarity(kind, a["arguments"].get(key), b["arguments"].get(key))
    return total / len(keys)


def _parsed(form: str) -> tuple[tuple[str, ...], list[dict[str, Any]] | str]:
    """(shape, calls sorted by name) or (("text",), text) of a canonical form."""
    value = json.loads(form)
    if "calls" not in value:
        return ("text",), value["text"]
    calls = sorted(value["calls"], key=lambda c: c["name"])  # stable: same-named calls keep their order
    return tuple(c["name"] for c in calls), calls


def similarity_matrix(forms: Sequence[str]) -> list[list[float]]:
    """Pairwise similarity in [0, 1]; 0 across different tool sets.

    >>> forms = ['{"text":"abc"}', '{"text":"abd"}', '{"calls":[{"arguments":{},"name":"X"}]}']
    >>> [round(x, 3) for x in similarity_matrix(forms)[0]]
    [1.0, 0.667, 0.0]
    """
    parsed = [_parsed(form) for form in forms]
    n = len(forms)
    sim = [[1.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            (shape_i, body_i), (shape_j, body_j) = parsed[i], parsed[j]
            if forms[i] == forms[j]:
                value = 1.0
            elif shape_i != shape_j:
                value = 0.0
            elif isinstance(body_i, str):
                value = Indel.normalized_similarity(body_i, body_j)
            else:
                pairs = zip(body_i, body_j, strict=True)  # type: ignore[arg-type]
                value = sum(call_similarity(a, b) for a, b in pairs) / len(body_i)
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
    scores = [round(sim[medoid][j], 4) for j in sorted(cluster, key=lambda j: b.indices[j])]
    tier = "exact" if len({b.forms[j] for j in cluster}) == 1 else "similar"
    groups = [make_group(proposals, b.forms[medoid], weight, members, match=tier, scores=scores)]
    groups += _rest(proposals, b, set(cluster))
    agreement = share(weight, len(b.voters))
    rivals = (c for w, _, c in ranked[1:] if w == weight)
    if any(all(sim[c][j] < threshold for j in cluster) for c in rivals):
        return abstain("similarity", "tie", b.voters, groups, float(agreement))
    if not passes(agreement, min_agreement):
        return abstain("similarity", "no_majority", b.voters, groups, float(agreement))
    return ConsensusResult(method="similarity", reached=True, action=proposals[b.indices[medoid]].action,
                           canonical=b.forms[medoid], agreement=float(agreement), teachers=b.voters,
                           winner_teachers=groups[0].teachers, groups=groups, match=tier)


def _rest(proposals: Sequence[Proposal], b: Ballot, taken: set[int]) -> list[VoteGroup]:
    """Exact groups of the votes outside the winning cluster, for the report."""
    left = [k for k in range(len(b.forms)) if k not in taken]
    rest = Ballot(indices=[b.indices[k] for k in left], forms=[b.forms[k] for k in left],
                  weights=[b.weights[k] for k in left])
    return [make_group(proposals, f, w, m) for f, w, m in exact_groups(rest)]
