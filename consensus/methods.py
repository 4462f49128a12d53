"""The method registry and the comparison of the student's action with the consensus.

`vote` and `similarity` are pure functions `(proposals, cwd, min_agreement) -> ConsensusResult`.
`judge` needs an LLM call, so the pipeline drives it through `consensus.judge`; it is a valid name
here but has no direct function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from consensus.canonical import canonical
from consensus.result import ConsensusResult
from consensus.similarity import similarity
from consensus.vote import vote
from ingestion.schema import Action, Proposal, ReplayError

Method = Callable[..., ConsensusResult]
METHODS: dict[str, Method] = {"vote": vote, "similarity": similarity}
METHOD_NAMES = ("vote", "similarity", "judge")
Verdict = Literal["agree", "pair", "abstain"]


class ConsensusError(ReplayError):
    """An unknown consensus method, or a method used the wrong way."""


def check_method(name: str) -> str:
    """The name if it is a known method, else a one-line error listing the valid ones.

    >>> check_method("judge")
    'judge'
    """
    if name not in METHOD_NAMES:
        raise ConsensusError(f"unknown consensus method {name!r}; choose one of {', '.join(METHOD_NAMES)}")
    return name


def get_method(name: str) -> Method:
    """The pure method called `name` (`vote`, `similarity`).

    >>> get_method("vote").__name__
    'vote'
    """
    if check_method(name) not in METHODS:
        raise ConsensusError(f"method {name!r} needs an LLM call: use consensus.judge through the pipeline")
    return METHODS[name]


def run_method(name: str, proposals: Sequence[Proposal], cwd: str | None = None,
               min_agreement: float = 0.5) -> ConsensusResult:
    """Apply a pure method by name.

    >>> run_method("vote", []).reason
    'no_votes'
    """
    return get_method(name)(proposals, cwd=cwd, min_agreement=min_agreement)


def compare(student_action: Action, result: ConsensusResult, cwd: str | None = None) -> Verdict:
    """`agree` when the student did what the teachers agreed on, `pair` when not, `abstain` without consensus.

    >>> r = ConsensusResult(method="vote", reached=True, action=Action(content="Done."))
    >>> compare(Action(content="done. "), r), compare(Action(content="Not yet."), r)
    ('agree', 'pair')
    """
    if not result.reached or result.action is None:
        return "abstain"
    if canonical(student_action, cwd) == canonical(result.action, cwd):
        return "agree"
    return "pair"
