"""The overview's numbers and the state list's index, gathered one state at a time. Pure.

The list page filters 20,000 states in the browser from a compact index: one short row per state,
strings replaced by numbers into shared tables (verdicts, traces, tools, teachers, tiers), so the whole
index stays around 100 bytes a state.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ingestion.schema import Action, TraceState
from replay.view.verdicts import Decision

SUMMARY_CHARS = 60


@dataclass
class TeacherTally:
    answers: int = 0
    failed: int = 0
    cached: int = 0
    cost_usd: float = 0.0
    voted: int = 0        # states where it gave a valid answer and a consensus was sought
    won: int = 0          # of those, states where it was in the winning group
    excluded: int = 0     # states it never saw (same family as the student)


class Names:
    """A string table: each distinct string gets the next number.

    >>> names = Names(); names.code("b"), names.code("a"), names.code("b"), names.values
    (0, 1, 0, ['b', 'a'])
    """

    def __init__(self) -> None:
        self.values: list[str] = []
        self._codes: dict[str, int] = {}

    def code(self, value: str) -> int:
        if value not in self._codes:
            self._codes[value] = len(self.values)
            self.values.append(value)
        return self._codes[value]


@dataclass
class Index:
    """Everything the overview and the list need, without the states themselves."""

    verdicts: Counter[str] = field(default_factory=Counter)
    teachers: dict[str, TeacherTally] = field(default_factory=dict)
    tiers: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    rows: list[list[Any]] = field(default_factory=list)
    names: dict[str, Names] = field(default_factory=lambda: {k: Names() for k in (
        "verdict", "trace", "tool", "teacher", "tier", "outcome")})

    def add(self, number: int, state: TraceState, decision: Decision) -> None:
        """Count one state and append its row: [number, verdict, trace, turn, tools, teachers, winners,
        tier, agreement, summary, outcome]."""
        self.verdicts[decision.verdict] += 1
        if decision.match:
            self.tiers[decision.match] += 1
        for name in decision.excluded:
            self._teacher(name).excluded += 1
        for proposal in decision.proposals:
            tally = self._teacher(proposal.teacher)
            tally.answers += 1
            tally.failed += proposal.action is None
            tally.cached += proposal.cached
            tally.cost_usd += proposal.cost_usd
        voters = sorted({p.teacher for p in decision.proposals if p.action is not None})
        if decision.verdict in ("pair", "agree", "abstained"):
            for name in voters:
                self._teacher(name).voted += 1
            for name in decision.winners:
                self._teacher(name).won += 1
        outcome = _outcome(state)
        if outcome:
            self.outcomes[outcome] += 1
        names = self.names
        tools = sorted({call.name for call in state.student_action.tool_calls}
                       | {call.name for call in (decision.chosen.tool_calls if decision.chosen else [])})
        self.rows.append([
            number, names["verdict"].code(decision.verdict), names["trace"].code(state.trace_id), state.turn,
            [names["tool"].code(t) for t in tools], [names["teacher"].code(t) for t in voters],
            [names["teacher"].code(t) for t in decision.winners],
            names["tier"].code(decision.match) if decision.match else -1,
            round(decision.result.agreement, 3) if decision.result is not None else None,
            summarize(state.student_action),
            names["outcome"].code(outcome) if outcome else -1,
        ])

    def _teacher(self, name: str) -> TeacherTally:
        return self.teachers.setdefault(name, TeacherTally())

    def meta(self) -> dict[str, list[str]]:
        return {key: names.values for key, names in self.names.items()}


def _outcome(state: TraceState) -> str | None:
    outcome = state.metadata.get("outcome") if isinstance(state.metadata, dict) else None
    kind = outcome.get("kind") if isinstance(outcome, dict) else None
    return kind if isinstance(kind, str) else None


def summarize(action: Action, limit: int = SUMMARY_CHARS) -> str:
    """One short line for an action: its first tool call (name and first argument), else its text.

    >>> from ingestion.schema import ToolCall
    >>> summarize(Action(tool_calls=[ToolCall(id="1", name="Bash", arguments={"command": "ls -la"})]))
    'Bash: ls -la'
    >>> summarize(Action(tool_calls=[ToolCall(id="1", name="Edit", arguments={"replace_all": False,
    ...                                                                         "file_path": "a.py"})]))
    'Edit: a.py'
    >>> summarize(Action(content="All done,\\n  thanks."))
    'All done, thanks.'
    """
    if action.tool_calls:
        call = action.tool_calls[0]
        values = list(call.arguments.values())
        first = next((v for v in values if isinstance(v, str)), values[0] if values else "")
        text = f"{call.name}: {first if isinstance(first, str) else json.dumps(first)}"
        if len(action.tool_calls) > 1:
            text = f"{text} (+{len(action.tool_calls) - 1})"
    else:
        text = action.content
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
