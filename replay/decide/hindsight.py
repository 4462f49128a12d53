"""Hindsight agreement: where the student failed and then corrected itself, did the teachers' consensus
already say what the correction was? A label-quality figure read from the traces themselves. Pure.

A failed state (`ingestion.outcome.is_failed` on `metadata["outcome"]`) may name its recovery:
`metadata["recovery"]`, the state id of the student's next turn in the same trace. Its student action
is what the student did once the failure was in front of it. The consensus reached at the failed state
is compared with that action by `consensus.methods.student_match`, the comparison every verdict uses:
`exact` (the same canonical action) or `intent` (the same intent key; exact matches count here too),
both in the failed state's context (its cwd and history).

A recovery need not have been put to the teachers (`--select outcome=error` asks the failed states
only): `read_recoveries` finds it among all the states OUT holds, reading states.jsonl's light lines
(no messages) — this module's one function with I/O, used at the edges (the run, the ablation).

Counted: `failed` states; of those `states`, the ones whose recovery is among the run's states;
`reached`, those where the pool reached a consensus; `exact` / `intent`, those where the consensus
matches the recovery. Rates are over `states` (a pool that abstains has not said the correction);
`*_rate_reached` are over `reached`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, computed_field

from consensus.intent_rules import IntentContext
from consensus.methods import student_match
from consensus.result import ConsensusResult
from ingestion.outcome import is_failed
from ingestion.schema import Action
from ingestion.store import STATES_FILE, state_rows


def recovery_map(rows: Iterable[Mapping[str, Any]]) -> dict[str, Action]:
    """Failed state id → the student action of the state its `metadata.recovery` names, from
    states.jsonl's light lines (state_id, metadata, student_action); a recovery not among them is
    left out (it counts as missing).

    >>> failed = {"outcome": {"kind": "error", "calls": []}, "recovery": "b"}
    >>> got = recovery_map([{"state_id": "a", "metadata": failed, "student_action": {"content": "x"}},
    ...                     {"state_id": "b", "metadata": {}, "student_action": {"content": "fixed"}}])
    >>> {k: v.content for k, v in got.items()}
    {'a': 'fixed'}
    """
    wanted: dict[str, str] = {}
    actions: dict[str, Any] = {}
    for row in rows:
        metadata = row.get("metadata") or {}
        recovery = metadata.get("recovery")
        if is_failed(metadata.get("outcome")) and isinstance(recovery, str) and recovery:
            wanted[row["state_id"]] = recovery
        actions[row["state_id"]] = row.get("student_action")
    return {failed: Action.model_validate(actions[recovery]) for failed, recovery in wanted.items()
            if actions.get(recovery) is not None}


def read_recoveries(out: Path) -> dict[str, Action]:
    """Every failed state's recovery action among all the states of a run folder (states.jsonl)."""
    if not (out / STATES_FILE).is_file():
        return {}
    return recovery_map(state_rows(out))


def hindsight_tier(result: ConsensusResult | None, recovery: Action, cwd: str | None = None,
                   context: IntentContext | None = None) -> str | None:
    """`exact` / `intent` when the consensus matches the student's recovery action, None when not
    (or when there is no consensus).

    >>> from ingestion.schema import ToolCall
    >>> read = Action(tool_calls=[ToolCall(id="1", name="Read", arguments={"file_path": "a.py"})])
    >>> cat = Action(tool_calls=[ToolCall(id="2", name="Bash", arguments={"command": "cat a.py"})])
    >>> r = ConsensusResult(method="vote", reached=True, action=read, match="exact")
    >>> hindsight_tier(r, read), hindsight_tier(r, cat), hindsight_tier(None, cat)
    ('exact', 'intent', None)
    """
    if result is None or not result.reached or result.action is None:
        return None
    return student_match(recovery, result, cwd, "intent", context or IntentContext(cwd))


class Hindsight(BaseModel):
    """report.json `hindsight`, and one pool's hindsight figures in `replay.ablate`."""

    failed: int = 0     # states whose student action failed
    states: int = 0     # ... whose recovery is among the states: the figure's denominator
    reached: int = 0    # ... where the teachers reached a consensus
    exact: int = 0      # ... whose consensus is the recovery, canonically
    intent: int = 0     # ... whose consensus has the recovery's intent (exact included)

    def add(self, failed: bool, has_recovery: bool, reached: bool, tier: str | None) -> None:
        """Count one state.

        >>> h = Hindsight(); h.add(True, True, True, "exact"); h.add(True, True, True, None)
        >>> h.add(True, False, True, None); h.add(False, False, True, None)
        >>> h.failed, h.states, h.reached, h.exact, h.intent, h.intent_rate
        (3, 2, 2, 1, 1, 0.5)
        """
        if not failed:
            return
        self.failed += 1
        if not has_recovery:
            return
        self.states += 1
        self.reached += int(reached)
        self.exact += int(tier == "exact")
        self.intent += int(tier in ("exact", "intent"))

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exact_rate(self) -> float | None:
        return _rate(self.exact, self.states)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def intent_rate(self) -> float | None:
        return _rate(self.intent, self.states)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def reached_rate(self) -> float | None:
        """The share of failed states (with a recovery) where the teachers reached a consensus."""
        return _rate(self.reached, self.states)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def intent_rate_reached(self) -> float | None:
        return _rate(self.intent, self.reached)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exact_rate_reached(self) -> float | None:
        return _rate(self.exact, self.reached)


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def hindsight_lines(hindsight: Mapping[str, Any] | None) -> list[str]:
    """The dataset card's hindsight section (empty without failed states).

    >>> lines = hindsight_lines({"failed": 3, "states": 2, "reached": 2, "exact": 1, "intent": 2,
    ...                          "exact_rate": 0.5, "intent_rate": 1.0})
    >>> lines[5]
    '| failed states with a recovery | 2 of 3 |'
    >>> lines[7]
    '| consensus = recovery, intent tier | 2 (100.0%) |'
    """
    if not hindsight or not hindsight.get("failed"):
        return []

    def pct(key: str) -> str:
        value = hindsight.get(f"{key}_rate")
        return "n/a" if value is None else f"{100 * value:.1f}%"

    return ["", "## Hindsight agreement", "", "| | n |", "|---|---|",
            f"| failed states with a recovery | {hindsight['states']} of {hindsight['failed']} |",
            f"| consensus = recovery, exact tier | {hindsight['exact']} ({pct('exact')}) |",
            f"| consensus = recovery, intent tier | {hindsight['intent']} ({pct('intent')}) |",
            f"| consensus reached | {hindsight['reached']} |", "",
            "Where the student's action failed (an error, a rejection, an interrupt) and its next turn "
            "corrected it, how often the teachers' consensus at the failed state already was that "
            "correction: a label-quality figure from the traces themselves (rates over the failed states "
            "with a recovery; no consensus counts as no match)."]
