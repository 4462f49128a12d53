"""What a student's action led to: the shape of `metadata["outcome"]`, shared by every reader.

A state's outcome is a plain dict (it is stored in states.jsonl and read by the export, the consensus'
hindsight figure and the view)::

    {"kind": "error",                       # the turn's worst call, see `worst`
     "calls": [{"id": "toolu_1", "name": "Bash", "kind": "error",
                "error": "head of the error text", "exit_code": 2}],
     # episode-level facts where the source records them (rollouts, trajectories):
     "reward": 1.0, "exit_status": "submitted", "agent_error": None}

Only the keys a source knows are present beyond `kind` and `calls`. A failed state (`is_failed`) may
carry `metadata["recovery"]`: the state id of the student's next turn in the same trace, its own
correction. Readers build the dicts with `call_outcome` and `turn_outcome`; which result texts mean
"rejected" or "interrupted" is data (`configs/`), not code here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingestion.schema import TraceState

KINDS = ("ok", "error", "rejected", "interrupted", "no_result")
FAILED = frozenset({"error", "rejected", "interrupted"})
# Worst first: a rejected call outweighs an interrupt, which outweighs an error; `ok` outweighs a call
# with no result, so `no_result` is a turn's kind only when none of its calls has a result.
_SEVERITY = {"rejected": 4, "interrupted": 3, "error": 2, "ok": 1, "no_result": 0}
ERROR_HEAD = 200


def worst(kinds: Iterable[str]) -> str:
    """The turn's kind from its calls' kinds (`no_result` for a turn without any).

    >>> worst(["ok", "error", "ok"]), worst(["error", "rejected"]), worst([]), worst(["no_result", "ok"])
    ('error', 'rejected', 'no_result', 'ok')
    """
    return max(kinds, key=_SEVERITY.__getitem__, default="no_result")


def call_outcome(call_id: str, name: str, kind: str, error: str | None = None,
                 exit_code: int | None = None) -> dict[str, Any]:
    """One tool call's outcome; `error` is cut to its first `ERROR_HEAD` characters.

    >>> call_outcome("c1", "Bash", "error", "x" * 300, 2)["error"] == "x" * 200
    True
    """
    if kind not in _SEVERITY:
        raise ValueError(f"outcome kind {kind!r} is not one of {', '.join(KINDS)}")
    head = error[:ERROR_HEAD] if error else None
    return {"id": call_id, "name": name, "kind": kind, "error": head, "exit_code": exit_code}


def turn_outcome(calls: list[dict[str, Any]], text_kind: str | None = None,
                 **episode: Any) -> dict[str, Any]:
    """A turn's outcome from its calls' outcomes; `text_kind` is what the next user message says of a
    turn without calls (`interrupted` / `rejected`, else `ok`); `episode` adds the source's own facts.

    >>> calls = [call_outcome("a", "Read", "ok"), call_outcome("b", "Edit", "error", "not found")]
    >>> turn_outcome(calls)["kind"]
    'error'
    >>> turn_outcome([], text_kind="interrupted")["kind"], turn_outcome([])["kind"]
    ('interrupted', 'ok')
    >>> turn_outcome([], reward=1.0)["reward"]
    1.0
    """
    kind = worst(c["kind"] for c in calls) if calls else (text_kind or "ok")
    return {"kind": kind, "calls": calls, **episode}


def kind_of(metadata: Any) -> str:
    """A state's outcome kind as report.json `outcomes` counts it ("ok" when the reader gave none).

    >>> kind_of({"outcome": {"kind": "error", "calls": []}}), kind_of({})
    ('error', 'ok')
    """
    outcome = metadata.get("outcome") if isinstance(metadata, dict) else None
    kind = outcome.get("kind") if isinstance(outcome, dict) else None
    return kind if isinstance(kind, str) else "ok"


def is_failed(outcome: dict[str, Any] | None) -> bool:
    """Whether a state's outcome is a failure (error, rejected, interrupted).

    >>> is_failed({"kind": "error", "calls": []}), is_failed({"kind": "no_result"}), is_failed(None)
    (True, False, False)
    """
    return bool(outcome) and outcome.get("kind") in FAILED


def link_recoveries(states: Iterable[TraceState]) -> Iterator[TraceState]:
    """The same states, in the same order; each failed one gains `metadata["recovery"]`, the id of the
    next state of its trace (the student's own correction). A trace's states come one after another, in
    turn order, so one state is held back until the next is seen.

    >>> from ingestion.schema import Action, TraceState
    >>> def s(turn, kind, trace="t"):
    ...     return TraceState(state_id=f"x:{trace}:{turn}", trace_id=trace, turn=turn, source="claude_code",
    ...                       messages=[], tools=[], student_action=Action(), student_model=None,
    ...                       metadata={"outcome": {"kind": kind, "calls": []}})
    >>> out = list(link_recoveries([s(0, "error"), s(1, "ok"), s(2, "rejected"), s(0, "ok", "u")]))
    >>> [st.metadata.get("recovery") for st in out]
    ['x:t:1', None, None, None]
    """
    held: TraceState | None = None
    for state in states:
        if held is not None:
            if held.trace_id == state.trace_id and is_failed(held.metadata.get("outcome")):
                held.metadata["recovery"] = state.state_id
            yield held
        held = state
    if held is not None:
        yield held
