"""Teacher × teacher agreement over the states both answered: raw agreement and Cohen's kappa.

Two answers agree when their actions are canonically equivalent (`consensus.canonical`, with the
state's cwd), or at the intent tier when they have the same intent key (`consensus.intent`). A teacher's
answer at a state is its first valid sample (lowest sample index); failed or invalid answers, and states
a teacher was excluded from (it has no answer there), are left out.

Kappa treats every canonical form as a category: chance agreement is Σ_k p_a(k)·p_b(k) over the two
teachers' form frequencies on their common states. Forms rarely repeat across states (they hold
paths and commands), so chance agreement is usually small and kappa close to the raw rate; it drops
where a few generic answers (`ls`, `git status`) make agreeing easy. Kappa is None when undefined:
no common state, or chance agreement of 1 (both always gave one and the same answer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from consensus.canonical import Canonical, canonical
from consensus.intent import intent_of
from consensus.intent_rules import IntentContext
from consensus.validity import screen
from ingestion.schema import Proposal, TraceState


class PairAgreement(BaseModel):
    a: str
    b: str
    states: int                # states both answered
    agree: int                 # of those, states with equivalent answers
    raw: float | None = None   # agree / states
    kappa: float | None = None


class AgreementMatrix(BaseModel):
    teachers: list[str]
    cells: list[list[PairAgreement]]  # cells[i][j]: teachers[i] with teachers[j]; symmetric
    tier: str = "exact"               # exact: canonical forms; intent: intent keys (consensus.intent)


def answer_forms(states: Sequence[TraceState], answers: Mapping[str, Sequence[Proposal]],
                 teachers: Sequence[str], tier: str = "exact") -> dict[str, dict[str, Canonical]]:
    """teacher → state_id → canonical form (tier "intent": intent key) of its first valid sample there.
    Proposals the state's tools make invalid (`consensus.validity`) are no answer, as in the vote.

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=Action())
    >>> p = lambda t, k, text: Proposal(state_id="s", teacher=t, model=t, sample=k,
    ...                                 action=Action(content=text) if text else None)
    >>> answer_forms([s], {"s": [p("a", 1, "Two"), p("a", 0, "One"), p("b", 0, None)]}, ["a", "b"])
    {'a': {'s': '{"text":"one"}'}, 'b': {}}
    """
    wanted = set(teachers)
    forms: dict[str, dict[str, Canonical]] = {name: {} for name in teachers}
    for state in states:
        cwd = state.metadata.get("cwd")
        context = IntentContext(cwd, state.messages)
        first: dict[str, Proposal] = {}
        for proposal in screen(answers.get(state.state_id, ()), state.tools):
            if proposal.action is None or proposal.teacher not in wanted:
                continue
            held = first.get(proposal.teacher)
            if held is None or proposal.sample < held.sample:
                first[proposal.teacher] = proposal
        for name, proposal in first.items():
            form = canonical(proposal.action, cwd)  # type: ignore[arg-type]
            forms[name][state.state_id] = intent_of(form, context) if tier == "intent" else form
    return forms


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two raters' labels, one (label_a, label_b) per item; None when undefined.

    >>> cohen_kappa([("x", "x"), ("y", "y"), ("x", "y"), ("y", "x")])
    0.0
    >>> cohen_kappa([("x", "x"), ("y", "y")]), cohen_kappa([("x", "x")]), cohen_kappa([])
    (1.0, None, None)
    """
    n = len(pairs)
    if not n:
        return None
    observed = sum(a == b for a, b in pairs) / n
    left, right = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(count * right[label] for label, count in left.items()) / (n * n)
    if chance >= 1.0:
        return None
    return round((observed - chance) / (1.0 - chance), 4)


def pair_agreement(a: str, b: str, forms_a: Mapping[str, Canonical],
                   forms_b: Mapping[str, Canonical]) -> PairAgreement:
    """Agreement of two teachers over the states both answered.

    >>> pair_agreement("a", "b", {"s1": "x", "s2": "y", "s3": "z"}, {"s1": "x", "s2": "x"}).raw
    0.5
    """
    common = sorted(forms_a.keys() & forms_b.keys())
    labels = [(forms_a[s], forms_b[s]) for s in common]
    agree = sum(x == y for x, y in labels)
    return PairAgreement(a=a, b=b, states=len(common), agree=agree,
                         raw=round(agree / len(common), 4) if common else None, kappa=cohen_kappa(labels))


def agreement_matrix(states: Sequence[TraceState], answers: Mapping[str, Sequence[Proposal]],
                     teachers: Sequence[str], tier: str = "exact") -> AgreementMatrix:
    """Every pair of `teachers` (the diagonal too: a teacher with itself over the states it answered),
    agreeing at `tier` (exact: canonically equivalent; intent: the same intent key).

    >>> from ingestion.schema import Action
    >>> s = [TraceState(state_id=f"s{i}", trace_id="t", turn=i, source="claude_code", messages=[],
    ...                 student_action=Action()) for i in range(2)]
    >>> p = lambda i, t, text: Proposal(state_id=f"s{i}", teacher=t, model=t, action=Action(content=text))
    >>> answers = {"s0": [p(0, "a", "x"), p(0, "b", "x")], "s1": [p(1, "a", "y"), p(1, "b", "z")]}
    >>> m = agreement_matrix(s, answers, ["a", "b"])
    >>> m.cells[0][1].raw, m.cells[0][1].kappa, m.cells[1][1].raw
    (0.5, 0.3333, 1.0)
    """
    forms = answer_forms(states, answers, teachers, tier)
    cells = [[pair_agreement(a, b, forms[a], forms[b]) for b in teachers] for a in teachers]
    return AgreementMatrix(teachers=list(teachers), cells=cells, tier=tier)
