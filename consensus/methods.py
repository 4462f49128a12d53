"""The method registry and the comparison of the student's action with the consensus.

`vote` and `similarity` are pure functions `(proposals, cwd, min_agreement) -> ConsensusResult`;
`weighted` is `vote` with each teacher's reliability as its weight (`consensus.weighted`), estimated
from a whole run's answers (`consensus.reliability`) before any state is decided.
`judge` needs an LLM call, so the pipeline drives it through `consensus.judge`; it is a valid name
here but has no direct function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from consensus.canonical import canonical
from consensus.intent import intent_of
from consensus.intent_rules import IntentContext
from consensus.result import ConsensusResult
from consensus.similarity import similarity
from consensus.vote import check_match, vote
from consensus.weighted import Weights, weighted
from ingestion.schema import Action, Proposal, ReplayError

Method = Callable[..., ConsensusResult]
METHODS: dict[str, Method] = {"vote": vote, "similarity": similarity, "weighted": weighted}
METHOD_NAMES = ("vote", "similarity", "judge", "weighted")
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
               min_agreement: float = 0.5, match: str = "intent",
               context: IntentContext | None = None, weights: Weights | None = None) -> ConsensusResult:
    """Apply a pure method by name; `match` and `context` are the tiers of `vote` (see consensus.vote);
    `weights` the teachers' weights for `weighted` (none: every teacher weighs the same, i.e. `vote`).

    >>> run_method("vote", []).reason, run_method("weighted", []).method
    ('no_votes', 'weighted')
    """
    method = get_method(name)
    if method is weighted:
        return weighted(proposals, weights if weights is not None else (lambda _t: 1.0), cwd=cwd,
                        min_agreement=min_agreement, match=match, context=context)
    if method is vote:
        return vote(proposals, cwd=cwd, min_agreement=min_agreement, match=match, context=context)
    return method(proposals, cwd=cwd, min_agreement=min_agreement)


def student_match(student_action: Action, result: ConsensusResult, cwd: str | None = None,
                  match: str = "intent", context: IntentContext | None = None) -> str | None:
    """The tier at which the student did what the consensus says (`exact`, `intent`), None if it did not.

    The same tiers as the vote: with match="intent" a student action of the consensus's intent
    agrees, whatever tier decided, so a pair always differs in intent (DPO would otherwise learn
    command spelling).

    >>> from ingestion.schema import ToolCall
    >>> read = Action(tool_calls=[ToolCall(id="1", name="Read", arguments={"file_path": "a.py"})])
    >>> r = ConsensusResult(method="vote", reached=True, action=read, match="exact")
    >>> cat = Action(tool_calls=[ToolCall(id="2", name="Bash", arguments={"command": "cat a.py"})])
    >>> student_match(read, r), student_match(cat, r), student_match(cat, r, match="exact")
    ('exact', 'intent', None)
    """
    if result.action is None:
        return None
    check_match(match)
    form = canonical(student_action, cwd)
    chosen = result.canonical if result.canonical is not None else canonical(result.action, cwd)
    if form == chosen:
        return "exact"
    if match != "intent":
        return None
    context = context or IntentContext(cwd)
    wanted = result.intent if result.intent is not None else intent_of(chosen, context)
    return "intent" if intent_of(form, context) == wanted else None


def compare(student_action: Action, result: ConsensusResult, cwd: str | None = None,
            match: str = "intent", context: IntentContext | None = None) -> Verdict:
    """`agree` when the student did what the teachers agreed on, `pair` when not, `abstain` without consensus.

    >>> r = ConsensusResult(method="vote", reached=True, action=Action(content="Done."))
    >>> compare(Action(content="done. "), r), compare(Action(content="Not yet."), r, match="exact")
    ('agree', 'pair')
    """
    if not result.reached or result.action is None:
        return "abstain"
    return "agree" if student_match(student_action, result, cwd, match, context) else "pair"
