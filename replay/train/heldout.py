"""The held-out yardsticks a student is judged on: pairs of states it never trained on.

- **held-out pairs**: the dataset's `test` split as DPO pairs — the teachers' consensus chosen, the
  student's action rejected. A `--format kto` or `sft` run holds no rejected column: its test rows of
  verdict `pair` get the student's action back from states.jsonl, so every format is judged on the
  same pairs.
- **recovery set**: every failed state of the held-out traces whose student recovered
  (`metadata.outcome` failed, `metadata.recovery` names its next turn; `ingestion/outcome.py`): the
  recovery chosen, the failed action rejected, at the failed state's prompt. It comes from the traces
  alone, never from a teacher, so it is the same yardstick whichever pool labelled the data.

Held-out traces are the `test` split's (`replay.run --test-split`: whole traces, so no prompt prefix
leaks from training). States are read once, keeping only those traces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ingestion.outcome import is_failed
from ingestion.schema import Action, TraceState
from replay.export.pairs import action_message, prompt_columns

Pair = dict[str, Any]
HELD_OUT, RECOVERY = "held_out_pairs", "recovery_set"
_COLUMNS = ("prompt", "chosen", "rejected", "tools", "state_id", "trace_id")


def pairs_of(rows: Iterable[Mapping[str, Any]], students: Mapping[str, dict[str, Any]]) -> list[Pair]:
    """DPO pairs from test rows of any format: DPO rows as they are; KTO / SFT rows of verdict `pair`
    (KTO: the desirable one) with the student's action (`students`: state id → its assistant
    message) as rejected.

    >>> p, a = [{"role": "user", "content": "go"}], lambda t: [{"role": "assistant", "content": t}]
    >>> kto = [{"prompt": p, "completion": a("c"), "label": True, "verdict": "pair", "tools": [],
    ...         "state_id": "s", "trace_id": "t"},
    ...        {"prompt": p, "completion": a("x"), "label": False, "verdict": "pair", "tools": [],
    ...         "state_id": "s", "trace_id": "t"}]
    >>> [(x["chosen"][0]["content"], x["rejected"][0]["content"]) for x in pairs_of(kto, {"s": a("r")[0]})]
    [('c', 'r')]
    """
    out = []
    for row in rows:
        if "rejected" in row:
            out.append({key: row[key] for key in _COLUMNS})
        elif row.get("verdict") == "pair" and row.get("label", True) and row["state_id"] in students:
            out.append({"prompt": row["prompt"], "chosen": row["completion"],
                        "rejected": [students[row["state_id"]]], "tools": row["tools"],
                        "state_id": row["state_id"], "trace_id": row["trace_id"]})
    return out


def recovery_pairs(states: Iterable[TraceState], traces: set[str]) -> list[Pair]:
    """The recovery set of the states of `traces` (in the order given; a trace's states in turn order).

    >>> from ingestion.schema import Action
    >>> def s(turn, text, kind, recovery=None):
    ...     meta = {"outcome": {"kind": kind, "calls": []}} | ({"recovery": recovery} if recovery else {})
    ...     return TraceState(state_id=f"t:{turn}", trace_id="t", turn=turn, source="claude_code",
    ...                       messages=[{"role": "user", "content": "go"}], metadata=meta,
    ...                       student_action=Action(content=text))
    >>> got = recovery_pairs([s(0, "bad", "error", "t:1"), s(1, "good", "ok")], {"t"})
    >>> [(p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in got]
    [('good', 'bad')]
    >>> recovery_pairs([s(0, "bad", "error", "t:1"), s(1, "good", "ok")], set())
    []
    """
    kept = [state for state in states if state.trace_id in traces]
    actions = {state.state_id: state.student_action for state in kept}
    out = []
    for state in kept:
        recovery = state.metadata.get("recovery")
        if not is_failed(state.metadata.get("outcome")) or recovery not in actions:
            continue
        prompt, tools = prompt_columns(state)
        out.append({"prompt": prompt, "chosen": [action_message(actions[recovery])],
                    "rejected": [action_message(state.student_action)], "tools": tools,
                    "state_id": state.state_id, "trace_id": state.trace_id})
    return out


def yardsticks(run: Path | None, test_rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Pair]]:
    """Both yardsticks of a run folder's test rows; without the run's states.jsonl (a dataset folder
    copied alone) only DPO rows' pairs, and no recovery set."""
    from ingestion.store import STATES_FILE, load_states, state_rows

    traces = {row["trace_id"] for row in test_rows}
    if run is None or not (run / STATES_FILE).is_file():
        return {HELD_OUT: pairs_of(test_rows, {}), RECOVERY: []}
    wanted = {row["state_id"] for row in test_rows if "rejected" not in row}
    students = {line["state_id"]: action_message(Action.model_validate(line["student_action"]))
                for line in state_rows(run) if line["state_id"] in wanted}
    return {HELD_OUT: pairs_of(test_rows, students),
            RECOVERY: recovery_pairs((s for s in load_states(run) if s.trace_id in traces), traces)}

