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
        found = self._codes.get(value)
        if found is None:
            found = self._codes[value] = len(self.values)
            self.values.append(value)
        return found


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

    def add(self, number: int, row: dict[str, Any], decision: Decision) -> None:
        """Count one state (its row of states.jsonl) and append its list row: [number, verdict, trace,
        turn, tools, teachers, winners, tier, agreement, summary, outcome]."""
        verdict, result, names, teachers = decision.verdict, decision.result, self.names, self.teachers
        self.verdicts[verdict] += 1
        match, winners, agreement = None, (), None
        if result is not None:
            match, winners = result.get("match") or None, result.get("winner_teachers") or ()
            agreement = round(result.get("agreement") or 0.0, 3)
            if match:
                self.tiers[match] += 1
        for name in decision.excluded:
            self._teacher(name).excluded += 1
        voters = set()
        for proposal in decision.proposals:
            name = proposal["teacher"]
            tally = teachers.get(name) or self._teacher(name)
            tally.answers += 1
            if proposal.get("action") is None:
                tally.failed += 1
            else:
                voters.add(name)
            if proposal.get("cached"):
                tally.cached += 1
            tally.cost_usd += proposal.get("cost_usd") or 0.0
        voted = sorted(voters)
        if verdict in ("pair", "agree", "abstained"):
            for name in voted:
                teachers[name].voted += 1
            for name in winners:
                self._teacher(name).won += 1
        outcome = _outcome(row)
        if outcome:
            self.outcomes[outcome] += 1
        student, chosen = row["student_action"], decision.chosen
        tools = {str(call.get("name")) for call in student.get("tool_calls") or ()}
        if chosen:
            tools.update(str(call.get("name")) for call in chosen.get("tool_calls") or ())
        teacher = names["teacher"].code
        self.rows.append([
            number, names["verdict"].code(verdict), names["trace"].code(row["trace_id"]), row["turn"],
            [names["tool"].code(t) for t in sorted(tools)], [teacher(t) for t in voted],
            [teacher(t) for t in winners], names["tier"].code(str(match)) if match else -1, agreement,
            summarize(student), names["outcome"].code(outcome) if outcome else -1,
        ])

    def _teacher(self, name: str) -> TeacherTally:
        return self.teachers.setdefault(name, TeacherTally())

    def meta(self) -> dict[str, list[str]]:
        return {key: names.values for key, names in self.names.items()}


def _outcome(row: dict[str, Any]) -> str | None:
    metadata = row.get("metadata")
    outcome = metadata.get("outcome") if isinstance(metadata, dict) else None
    kind = outcome.get("kind") if isinstance(outcome, dict) else None
    return kind if isinstance(kind, str) else None


def summarize(action: dict[str, Any], limit: int = SUMMARY_CHARS) -> str:
    """One short line for an action (an Action as JSON): its first tool call (name and first argument),
    else its text.

    >>> summarize({"tool_calls": [{"id": "1", "name": "Bash", "arguments": {"command": "ls -la"}}]})
    'Bash: ls -la'
    >>> summarize({"tool_calls": [{"id": "1", "name": "Edit", "arguments": {"replace_all": False,
    ...                                                                     "file_path": "a.py"}}]})
    'Edit: a.py'
    >>> summarize({"content": "All done,\\n  thanks.", "tool_calls": []})
    'All done, thanks.'
    """
    calls = action.get("tool_calls") or ()
    if calls:
        call = calls[0]
        arguments = call.get("arguments")
        values = list(arguments.values()) if isinstance(arguments, dict) else [arguments]
        first = values[0] if values else ""
        if not isinstance(first, str):
            found = next((v for v in values if isinstance(v, str)), None)
            first = found if found is not None else json.dumps(first)
        text = f"{call.get('name')}: {first}"
        if len(calls) > 1:
            text = f"{text} (+{len(calls) - 1})"
    else:
        text = action.get("content") or ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
