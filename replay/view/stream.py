"""The run's states as the view reads them: states.jsonl's rows beside their trace's message table.

The view draws a state from its row (ids, the student's action, metadata) and the ranges of its trace's
messages it shows, never from a rebuilt TraceState: the run stores each message once per trace
(`ingestion.store`), and so does the view, so rebuilding and validating every state's whole history
would be work thrown away. The trace table is read by the store's own reader, one segment at a time.
A run from before linear storage (a full state per line) is read into the same shape here, each trace's
distinct messages numbered once, so the rest of the view knows one form.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ingestion.schema import ReplayError, TraceState
from ingestion.store import STATES_FILE, TRACES_FILE, Segments, rebuild_state, to_ranges


class StreamError(ReplayError):
    """states.jsonl / traces.jsonl cannot be read as a run's states."""


class _Unsegmented:
    """The trace tables of a run written before linear storage: a new segment per trace, its distinct
    messages numbered in the order met (known by their JSON, as the store's writer knows them)."""

    def __init__(self) -> None:
        self.segment = -1
        self.messages: list[dict[str, Any]] = []
        self.tools: list[list[dict[str, Any]]] = []
        self._trace: tuple[Any, Any] | None = None
        self._known: dict[bytes, int] = {}

    def need(self, *_: int) -> None:
        """All of a row's messages are in the table once `segment_row` returned (the store's API)."""

    def segment_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """The row in linear storage's form (`segment`, message ranges, a tool-list index)."""
        if self._trace != (row.get("trace_id"), row.get("source")):
            self._trace = (row.get("trace_id"), row.get("source"))
            self.segment += 1
            self.messages, self.tools, self._known = [], [], {}
        indices = []
        for message in row.pop("messages", None) or []:
            key = orjson.dumps(message)
            if key not in self._known:
                self._known[key] = len(self.messages)
                self.messages.append(message)
            indices.append(self._known[key])
        self.tools.append(row.pop("tools", None) or [])
        return {**row, "segment": self.segment, "messages": to_ranges(indices), "tools": len(self.tools) - 1}


def iter_rows(folder: Path) -> Iterator[tuple[dict[str, Any], Any]]:
    """(row, its trace table) per state of the run in `folder`, in the run's order. The table
    (`.segment`, `.messages`, `.tools`) holds the row's segment: read what it needs before the next row.
    A row is states.jsonl's line: its `messages` are half-open ranges of the table's message indices.
    """
    states_path, traces_path = folder / STATES_FILE, folder / TRACES_FILE
    number = 0
    segments: Any = None
    try:
        with open(states_path, "rb") as handle:
            for line in handle:
                number += 1
                if line.isspace():
                    continue
                row = orjson.loads(line)
                if "segment" not in row:          # written before linear storage
                    if not isinstance(segments, _Unsegmented):
                        segments = _Unsegmented()
                    row = segments.segment_row(row)
                else:
                    if segments is None:
                        segments = Segments(open(traces_path, "rb"), str(traces_path))
                    last = max((stop for _, stop in row["messages"]), default=0) - 1
                    segments.need(row["segment"], last, row["tools"])
                yield row, segments
    except (orjson.JSONDecodeError, KeyError, TypeError, IndexError, ValueError, AttributeError) as error:
        raise StreamError(f"{states_path}:{number}: not a state written by replay.run ({error})") from error
    except OSError as error:
        raise StreamError(f"cannot read the run's states: {error.strerror or error}") from error
    finally:
        if isinstance(segments, Segments):
            segments.handle.close()


def trace_state(row: dict[str, Any], segments: Any) -> TraceState:
    """The row as a TraceState (the store's own rebuild), for what needs one: deciding a state again."""
    return rebuild_state(dict(row), segments)
