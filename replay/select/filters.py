"""`--select`: which states are put to the teachers (#25 item 3); the others are counted, never sent.

Filters combine: AND across `--select` flags, OR within one (`outcome=error,rejected`). Each is a
pure function of a trace's states in turn order:

- `outcome=KIND,...`  the state's outcome kind (ok, error, rejected, interrupted, no_result; `failed`
  is short for error,rejected,interrupted);
- `tool=NAME,...`     the student called one of these tools;
- `after-failure=N`   a failed state and the N states after it in its trace;
- `per-trace=N[:SEED]` at most N states per trace, a seeded sample of those the other filters keep:
  each state ranked by a hash of (seed, state id), so a run, a re-run and a longer session pick the
  same states.

The choice is made on light rows (id, trace, outcome kind, tool names) read from OUT/states.jsonl,
and written to OUT/selection.json; `asked_states(OUT)` is the stream of states that are asked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ingestion.outcome import FAILED, KINDS, kind_of
from ingestion.schema import ReplayError, TraceState
from ingestion.store import load_states, state_rows

SELECTION_FILE = "selection.json"
DEFAULT_SEED = 0
KEYS = ("outcome", "tool", "after-failure", "per-trace")


class SelectError(ReplayError):
    """A --select value that is not a filter: one line, exit 2."""


class Row(NamedTuple):
    state_id: str
    trace_id: str
    kind: str                 # the outcome kind ("ok" where the source records none)
    tools: frozenset[str]


@dataclass(frozen=True)
class Selection:
    outcomes: list[frozenset[str]] = field(default_factory=list)   # each an OR, ANDed together
    tools: list[frozenset[str]] = field(default_factory=list)
    after_failure: int | None = None
    per_trace: int | None = None
    seed: int = DEFAULT_SEED

    def __bool__(self) -> bool:
        return bool(self.outcomes or self.tools) or self.after_failure is not None \
            or self.per_trace is not None


def _count(key: str, value: str, least: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = least - 1
    if number < least:
        raise SelectError(f"--select {key}={value}: expected a whole number ≥ {least}")
    return number


def parse_filter(text: str) -> tuple[str, Any]:
    """One `--select` value → (key, value); SelectError (one line) when it is not a filter.

    >>> key, kinds = parse_filter("outcome=error,rejected"); key, sorted(kinds)
    ('outcome', ['error', 'rejected'])
    >>> parse_filter("per-trace=20:7"), parse_filter("after-failure=2")
    (('per-trace', (20, 7)), ('after-failure', 2))
    >>> parse_filter("outcome=eror")
    Traceback (most recent call last):
    ...
    replay.select.filters.SelectError: --select outcome=eror: unknown outcome 'eror' (one of ok, error, \
rejected, interrupted, no_result, failed)
    """
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or key not in KEYS:
        raise SelectError(f"--select {text}: expected KEY=VALUE with KEY one of {', '.join(KEYS)}")
    if key in ("outcome", "tool"):
        names = [v.strip() for v in value.split(",") if v.strip()]
        if not names:
            raise SelectError(f"--select {text}: name at least one {key}")
        if key == "outcome":
            for name in names:
                if name not in KINDS and name != "failed":
                    raise SelectError(f"--select {text}: unknown outcome {name!r} (one of "
                                      f"{', '.join(KINDS)}, failed)")
            names = [k for n in names for k in (sorted(FAILED) if n == "failed" else [n])]
        return key, frozenset(names)
    if key == "after-failure":
        return key, _count(key, value, 0)
    count, _, seed = value.partition(":")
    return key, (_count(key, count, 1), _count(key, seed, 0) if seed else DEFAULT_SEED)


def parse_selection(values: Iterable[str]) -> Selection:
    """Every `--select` value, combined.

    >>> s = parse_selection(["outcome=failed", "tool=Edit,Bash", "per-trace=5"])
    >>> sorted(s.outcomes[0]), sorted(s.tools[0]), s.per_trace, bool(parse_selection([]))
    (['error', 'interrupted', 'rejected'], ['Bash', 'Edit'], 5, False)
    """
    outcomes, tools = [], []
    after = per = None
    seed = DEFAULT_SEED
    for text in values:
        key, value = parse_filter(text)
        if key == "outcome":
            outcomes.append(value)
        elif key == "tool":
            tools.append(value)
        elif key == "after-failure":
            after = value if after is None else min(after, value)   # AND of two windows: the narrower
        else:
            per, seed = (value if per is None else (min(per, value[0]), value[1]))
    return Selection(outcomes, tools, after, per, seed)


def row_of(state: TraceState) -> Row:
    """The light row the selection reads.

    >>> from ingestion.schema import Action, ToolCall
    >>> s = TraceState(state_id="x:t:0", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                tools=[], student_action=Action(tool_calls=[ToolCall(id="c", name="Bash",
    ...                arguments={})]), student_model=None, metadata={"outcome": {"kind": "error"}})
    >>> row_of(s)
    Row(state_id='x:t:0', trace_id='t', kind='error', tools=frozenset({'Bash'}))
    """
    return _row(state.state_id, state.trace_id, state.metadata,
                [c.name for c in state.student_action.tool_calls])


def _row(state_id: str, trace_id: str, metadata: dict[str, Any], tools: list[str]) -> Row:
    return Row(state_id, trace_id, kind_of(metadata), frozenset(tools))


def _rank(seed: int, state_id: str) -> bytes:
    return hashlib.sha256(f"{seed}:{state_id}".encode()).digest()


def choose(rows: Iterable[Row], selection: Selection) -> set[str]:
    """The ids of the states `selection` keeps; rows in stream order (a trace's states together, in
    turn order).

    >>> rows = [Row(f"t:{i}", "t", k, frozenset({"Bash"} if i % 2 else {"Read"}))
    ...         for i, k in enumerate(["ok", "error", "ok", "ok", "ok", "rejected"])]
    >>> sorted(choose(rows, parse_selection(["outcome=error,rejected"])))
    ['t:1', 't:5']
    >>> sorted(choose(rows, parse_selection(["after-failure=2"])))
    ['t:1', 't:2', 't:3', 't:5']
    >>> sorted(choose(rows, parse_selection(["after-failure=2", "tool=Bash"])))
    ['t:1', 't:3', 't:5']
    >>> len(choose(rows, parse_selection(["per-trace=2"])))
    2
    """
    kept: set[str] = set()
    trace: list[Row] = []
    for row in rows:
        if trace and row.trace_id != trace[0].trace_id:
            kept |= _choose_trace(trace, selection)
            trace = []
        trace.append(row)
    if trace:
        kept |= _choose_trace(trace, selection)
    return kept


def _choose_trace(rows: list[Row], selection: Selection) -> set[str]:
    window = -1   # the last index an after-failure window reaches
    passing = []
    for index, row in enumerate(rows):
        if selection.after_failure is not None:
            if row.kind in FAILED:
                window = index + selection.after_failure
            if index > window:
                continue
        if all(row.kind in any_of for any_of in selection.outcomes) \
                and all(row.tools & any_of for any_of in selection.tools):
            passing.append(row)
    if selection.per_trace is not None and len(passing) > selection.per_trace:
        passing = sorted(passing, key=lambda r: _rank(selection.seed, r.state_id))[:selection.per_trace]
    return {row.state_id for row in passing}


def read_rows(out: Path) -> Iterator[Row]:
    """The rows of OUT/states.jsonl, without rebuilding any message (I/O edge of `choose`)."""
    for data in state_rows(out):
        calls = (data.get("student_action") or {}).get("tool_calls") or ()
        yield _row(data["state_id"], data["trace_id"], data.get("metadata") or {},
                   [c.get("name") or "" for c in calls])


def select_into(out: Path, values: list[str]) -> tuple[dict[str, int], int]:
    """Outcome counts of every state in OUT, and how many states `values` leave out; writes
    OUT/selection.json (the filters and the ids left out) when there are filters."""
    selection = parse_selection(values)
    rows = list(read_rows(out))
    outcomes: dict[str, int] = {}
    for row in rows:
        outcomes[row.kind] = outcomes.get(row.kind, 0) + 1
    if not selection:
        return dict(sorted(outcomes.items())), 0
    kept = choose(rows, selection)
    left_out = [row.state_id for row in rows if row.state_id not in kept]
    (out / SELECTION_FILE).write_bytes(orjson.dumps(
        {"select": values, "states": len(rows), "selected": len(kept), "unselected": left_out},
        option=orjson.OPT_INDENT_2))
    return dict(sorted(outcomes.items())), len(left_out)


def asked_states(out: Path) -> Iterator[TraceState]:
    """The states of OUT that are put to the teachers: all, less those OUT/selection.json leaves out."""
    path = out / SELECTION_FILE
    left_out = set(orjson.loads(path.read_bytes())["unselected"]) if path.is_file() else set()
    return (state for state in load_states(out) if state.state_id not in left_out)
