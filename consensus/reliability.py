"""Each teacher's reliability without ground truth: Dawid–Skene EM over intent keys. Pure.

The one-coin Dawid–Skene model (Dawid & Skene 1979, the single-accuracy variant used by annotation
tools): at every state there is one true answer, unknown; teacher t gives it with probability p_t and
otherwise one of the other answers seen at that state, uniformly. Answers are intent keys
(`consensus.intent`), so `cat a.py` and `Read a.py` are one answer. The label set is open (any key can
be proposed), so a state's classes are the distinct keys given there: the full-confusion-matrix model
has no fixed classes to fill a matrix with, which is why the one-coin variant is used.

EM, deterministic: start every p_t at `prior`; E-step: each state's posterior over its keys,
∝ Π_t p_t if t gave the key, (1 − p_t)/(K − 1) if not (K = the state's distinct keys, at least 2);
M-step: p_t = (posterior mass on t's keys + a) / (t's answers + a + b), a Beta(a, b) prior that keeps
a teacher seen a few times away from 0 and 1. Stops when no p_t moves more than `tol`.
States with one voter say nothing about anyone and are skipped.

Per tool family: the same posteriors, p_t summed over the states of one family only (a state's
family is given by the caller: the tool most of its answers use).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from consensus.canonical import canonical
from consensus.intent import intent_of
from consensus.intent_rules import IntentContext
from ingestion.schema import Action, Proposal, TraceState

Item = Mapping[str, str]  # teacher → the intent key it gave at one state


class Reliability(BaseModel):
    """Estimated accuracy per teacher (overall and per family), and what it rests on."""

    teachers: dict[str, float] = Field(default_factory=dict)              # p_t
    answers: dict[str, int] = Field(default_factory=dict)                 # states it answered (≥ 2 voters)
    families: dict[str, dict[str, float]] = Field(default_factory=dict)   # family → teacher → p
    family_answers: dict[str, dict[str, int]] = Field(default_factory=dict)
    states: int = 0
    iterations: int = 0

    def weight(self, teacher: str) -> float:
        """The teacher's vote weight for `--consensus weighted` (its reliability; unseen → 0.5)."""
        return self.teachers.get(teacher, 0.5)


Pattern = tuple[tuple[str, ...], ...]  # a state's teachers, grouped by the key they gave (sorted)


def pattern(item: Item) -> Pattern:
    """Which teachers gave the same key at a state: all the model needs of it, so EM runs over the
    distinct patterns (at most a few thousand for 8 teachers) however many states there are.

    >>> pattern({"c": "y", "a": "x", "b": "x"})
    (('a', 'b'), ('c',))
    """
    groups: dict[str, list[str]] = defaultdict(list)
    for teacher, key in item.items():
        groups[key].append(teacher)
    return tuple(sorted(tuple(sorted(g)) for g in groups.values()))


def _posterior(groups: Pattern, p: Mapping[str, float]) -> list[float]:
    others = max(len(groups) - 1, 1)
    log_right = {t: math.log(min(max(p[t], 1e-6), 1 - 1e-6)) for g in groups for t in g}
    log_wrong = {t: math.log((1 - min(max(p[t], 1e-6), 1 - 1e-6)) / others) for g in groups for t in g}
    base = sum(log_wrong.values())
    logs = [base + sum(log_right[t] - log_wrong[t] for t in g) for g in groups]
    top = max(logs)
    weights = [math.exp(v - top) for v in logs]
    norm = sum(weights)
    return [w / norm for w in weights]


def _rates(counted: Mapping[tuple[str, Pattern], int], p: Mapping[str, float]
           ) -> dict[str, dict[str, tuple[float, int]]]:
    """family → teacher → (posterior mass on its answers, its answers)."""
    mass: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0]))
    for (family, groups), n in counted.items():
        for group, post in zip(groups, _posterior(groups, p), strict=True):
            for teacher in group:
                cell = mass[family][teacher]
                cell[0] += n * post
                cell[1] += n
    return {f: {t: (m, int(c)) for t, (m, c) in row.items()} for f, row in mass.items()}


def dawid_skene(items: Sequence[Item], families: Sequence[str] | None = None, prior: float = 0.7,
                a: float = 2.0, b: float = 1.0, tol: float = 1e-7, max_iter: int = 2000,
                min_family: int = 5) -> Reliability:
    """One-coin Dawid–Skene over the items (one per state); `families[i]` is item i's tool family.
    A (teacher, family) estimate is reported when the teacher answered at least `min_family` states
    of that family.

    >>> items = [{"a": "x", "b": "x", "c": "y"}, {"a": "z", "b": "z", "c": "z"},
    ...          {"a": "u", "b": "u", "c": "v"}, {"a": "k", "b": "k", "c": "k"}]
    >>> r = dawid_skene(items)
    >>> r.teachers["a"] > r.teachers["c"], r.teachers["a"] == r.teachers["b"], r.states
    (True, True, 4)
    >>> dawid_skene([{"a": "x"}]).teachers
    {}
    """
    counted: dict[tuple[str, Pattern], int] = defaultdict(int)
    kept = 0
    for index, item in enumerate(items):
        if len(item) >= 2:
            counted[(families[index] if families is not None else "", pattern(item))] += 1
            kept += 1
    teachers = sorted({t for (_, groups) in counted for g in groups for t in g})
    p = dict.fromkeys(teachers, prior)
    iterations = 0

    def estimate(mass: float, answers: int) -> float:
        return (mass + a - 1) / (answers + a + b - 2)

    while counted and iterations < max_iter:
        iterations += 1
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        for row in _rates(counted, p).values():
            for teacher, (mass, answers) in row.items():
                totals[teacher][0] += mass
                totals[teacher][1] += answers
        new = {t: estimate(*totals[t]) for t in teachers}
        moved = max(abs(new[t] - p[t]) for t in teachers)
        p = new
        if moved < tol:
            break
    result = Reliability(teachers={t: round(v, 4) for t, v in p.items()}, states=kept, iterations=iterations)
    per_family = _rates(counted, p)
    result.answers = {t: sum(row[t][1] for row in per_family.values() if t in row) for t in teachers}
    if families is None:
        return result
    for family in sorted(per_family):
        seen = {t: v for t, v in sorted(per_family[family].items()) if v[1] >= min_family}
        if seen:
            result.families[family] = {t: round(estimate(*v), 4) for t, v in seen.items()}
            result.family_answers[family] = {t: v[1] for t, v in seen.items()}
    return result


def family_of(action: Action) -> str:
    """A proposal's tool family: its first tool's name, `text` for a reply without calls.

    >>> from ingestion.schema import ToolCall
    >>> family_of(Action(content="hi")), family_of(Action(tool_calls=[ToolCall(id="1", name="Edit")]))
    ('text', 'Edit')
    """
    return action.tool_calls[0].name if action.tool_calls else "text"


def state_keys(state: TraceState, proposals: Sequence[Proposal], match: str = "intent"
               ) -> tuple[dict[str, str], str]:
    """(teacher → vote key of its first valid answer, the state's tool family). Keys are intent keys
    (`match="intent"`) or canonical forms.

    >>> from ingestion.schema import ToolCall
    >>> bash = lambda t, c: Proposal(state_id="s", teacher=t, model=t, action=Action(tool_calls=[
    ...     ToolCall(id=t, name="Bash", arguments={"command": c})]))
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=Action())
    >>> keys, family = state_keys(s, [bash("a", "ls"), bash("b", "ls  "), bash("c", "pwd")])
    >>> keys["a"] == keys["b"] != keys["c"], family
    (True, 'Bash')
    """
    cwd = state.metadata.get("cwd")
    context = IntentContext(cwd, state.messages)
    keys: dict[str, str] = {}
    families: Counter[str] = Counter()
    for proposal in sorted(proposals, key=lambda p: p.sample):
        if proposal.action is None or proposal.teacher in keys:
            continue
        form = canonical(proposal.action, cwd)
        keys[proposal.teacher] = intent_of(form, context) if match == "intent" else form
        families[family_of(proposal.action)] += 1
    family = min(families, key=lambda f: (-families[f], f)) if families else "none"
    return keys, family
