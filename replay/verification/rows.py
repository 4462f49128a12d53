"""The run's rows with what the branches said: `value_chosen`, `value_rejected`, `verified`, `flipped` and
`verification` (the outcome, each action's rewards and interval, the difference's interval). Pure.

- `dpo`, `sft`: the rows as they were, a flipped pair flagged (`flipped`), never swapped: which of two
  actions to train towards is the run's call, the flag says where the environment disagreed.
- `kto`: the labels follow the values where the environment tells them apart: a verified state's
  consensus is desirable and the student's action undesirable (a row added when the run had none, since
  its action did not fail), a flipped state's the other way round; tied and unverifiable states keep
  the teachers' labels.
- `verified` says the row's training signal is the one the environment confirmed: a DPO/SFT row of a
  verified pair; a KTO row whose label the values gave. `--verified-only` keeps those rows.
Rows of states that were no pair (KTO/SFT keep `agree`, `abstained`) get null values and `not_a_pair`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from replay.verification.values import Outcome, Value

VERIFY_COLUMNS = ("value_chosen", "value_rejected", "verified", "flipped", "verification")


class PairCheck(BaseModel):
    """What the environment said about one pair (verify/values.jsonl, one line per pair)."""

    state_id: str
    outcome: Outcome
    reason: str | None = None              # unverifiable: why (replay.verification.plan.REASONS)
    chosen: Value = Value()
    rejected: Value = Value()
    difference: tuple[float, float] | None = None    # 95% interval of value_chosen - value_rejected
    restore_mismatches: int = 0            # replayed observations that differed from the record
    restore_volatile: int = 0              # ... in durations, clock times or dates only (not mismatches)
    max_turns: int | None = None
    branches: list[dict[str, Any]] = []    # each branch's outcome, for the view (no text but errors)


def columns(check: PairCheck | None) -> dict[str, Any]:
    """The verify columns of a DPO/SFT row.

    >>> c = PairCheck(state_id="s", outcome="flipped", chosen=Value(value=0.0), rejected=Value(value=1.0))
    >>> {k: v for k, v in columns(c).items() if k != "verification"}
    {'value_chosen': 0.0, 'value_rejected': 1.0, 'verified': False, 'flipped': True}
    >>> columns(None)["verification"]
    {'outcome': 'not_a_pair'}
    """
    if check is None:
        return {"value_chosen": None, "value_rejected": None, "verified": False, "flipped": False,
                "verification": {"outcome": "not_a_pair"}}
    detail = check.model_dump(mode="json", exclude={"state_id", "branches"})
    return {"value_chosen": check.chosen.value, "value_rejected": check.rejected.value,
            "verified": check.outcome == "verified", "flipped": check.outcome == "flipped",
            "verification": detail}


def annotate(rows: Iterable[dict[str, Any]], checks: Mapping[str, PairCheck], fmt: str,
             students: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of `fmt` with the verify columns; for KTO, labels following the values.

    `students`: state id → the student's action as an assistant message (a KTO row it may need).

    >>> row = {"state_id": "s", "prompt": [], "completion": [{"content": "cons"}], "label": True,
    ...        "completion_from": "consensus", "verdict": "pair"}
    >>> check = PairCheck(state_id="s", outcome="flipped", chosen=Value(value=0.0), rejected=Value(value=1.0))
    >>> out = annotate([row], {"s": check}, "kto", {"s": {"content": "stud"}})
    >>> [(r["completion"][0]["content"], r["label"], r["verified"]) for r in out]
    [('cons', False, True), ('stud', True, True)]
    """
    if fmt != "kto":
        return [{**row, **columns(checks.get(row["state_id"]))} for row in rows]
    out: list[dict[str, Any]] = []
    by_state: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_state.setdefault(row["state_id"], []).append(row)
    for state_id, group in by_state.items():
        out += _kto_state(group, checks.get(state_id), students.get(state_id))
    return out


def _kto_state(group: list[dict[str, Any]], check: PairCheck | None,
               student: dict[str, Any] | None) -> list[dict[str, Any]]:
    extra = columns(check)
    if check is None or check.outcome not in ("verified", "flipped"):
        return [{**row, **extra, "verified": False} for row in group]
    consensus_good = check.outcome == "verified"
    rows = []
    for row in group:
        label = consensus_good if row.get("completion_from") == "consensus" else not consensus_good
        rows.append({**row, **extra, "label": label, "verified": True})
    if student is not None and not any(row.get("completion_from") == "student" for row in group):
        model = next((row for row in group if row.get("completion_from") == "consensus"), None)
        if model is not None:
            rows.append({**model, **extra, "completion": [student], "label": not consensus_good,
                         "completion_from": "student", "verified": True})
    return rows


def keep_verified(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`--verified-only`: the rows whose training signal the environment confirmed.

    >>> keep_verified([{"verified": True, "n": 1}, {"verified": False, "n": 2}])
    [{'verified': True, 'n': 1}]
    """
    return [row for row in rows if row.get("verified")]
