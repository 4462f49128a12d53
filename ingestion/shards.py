"""States written apart (a worker process's file) and appended to a run's store as if written there one
by one (replay/ingest/parallel.py, issue #39).

A `Shard` holds the rows of one file's states, serialised by `ShardWriter` with segments numbered from
0, and what appending it needs to know of its edges: the first and last state's trace, the distinct
messages and tool lists of its first and last segment (their digests, in index order) and whether its
last state failed. Appending (`MergingWriter.write_shard`) renumbers the segments after the writer's own;
when the shard's first trace is the one the writer's last state belongs to, the shard's first segment
goes on in the writer's current one, as one process would write it: messages the segment holds already
are not written again, the others are numbered after them, and the first segment's rows point at the
new numbers.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace
from typing import IO

import orjson

from ingestion.outcome import is_failed
from ingestion.schema import TraceState
from ingestion.store import StateWriter, _Table, _Writer, to_ranges

Key = tuple[str, str]   # (trace_id, source): one segment's trace


@dataclass
class Tables:
    """One segment's distinct messages and tool lists: their digests in index order."""

    messages: list[bytes]
    tools: list[bytes]


@dataclass
class Shard:
    """The rows of some states written apart, segments numbered from 0, and their edges."""

    states: bytes
    traces: bytes
    segments: int
    count: int
    first: Key | None = None          # the first state's trace
    last: Key | None = None           # the last state's trace
    first_state: str | None = None    # the first state's id (a recovery the previous file's last names)
    last_failed: bool = False         # the last state failed: the next state of its trace recovers it
    first_tables: Tables | None = None
    last_tables: Tables | None = None
    first_end: tuple[int, int] = (0, 0)   # where the first segment ends in (states, traces)

    def with_recovery(self, state_id: str) -> Shard:
        """The shard whose last state names `state_id` as its recovery (ingestion.outcome), set as
        `link_recoveries` sets it: last in the metadata unless the reader gave one already."""
        start = self.states.rfind(b"\n", 0, len(self.states) - 1) + 1
        row = orjson.loads(self.states[start:])
        row["metadata"]["recovery"] = state_id
        return replace(self, states=self.states[:start] + orjson.dumps(row) + b"\n", last_failed=False)


class ShardWriter(_Writer):
    """A writer into memory, for states that another process appends (replay/ingest/parallel.py)."""

    def __init__(self) -> None:
        super().__init__([io.BytesIO(), io.BytesIO()])
        self._first: Key | None = None
        self._first_state: str | None = None
        self._first_tables: Tables | None = None
        self._first_end = (0, 0)
        self._last_failed = False

    def write(self, state: TraceState) -> None:
        if self._first is None:
            self._first, self._first_state = (state.trace_id, state.source), state.state_id
        super().write(state)
        self._last_failed = is_failed(state.metadata.get("outcome"))

    def _open_segment(self, state: TraceState, out: io.BytesIO) -> None:   # type: ignore[override]
        if self._segment == 0:   # the first segment ends here
            self._first_tables = self._tables()
            states_out, traces_out = self._out
            self._first_end = (states_out.tell(), traces_out.tell())
        super()._open_segment(state, out)

    def _tables(self) -> Tables:
        return Tables(list(self._messages.by_digest), list(self._tools.by_digest))

    def shard(self) -> Shard:
        states_out, traces_out = self._out
        states, traces = states_out.getvalue(), traces_out.getvalue()
        last = self._tables() if self.states else None
        first_end = self._first_end if self._segment > 0 else (len(states), len(traces))
        return Shard(states, traces, self._segment + 1, self.states, self._first, self._trace,
                     self._first_state, self._last_failed, self._first_tables or last, last, first_end)


_SEGMENT_KEY = b',"segment":'
_LINE_START = b'{"segment":'


def write_renumbered(out: IO[bytes], lines: bytes, base: int, in_row: bool) -> None:
    """Write `lines` with every segment number raised by `base`: a trace line starts with it; a state row
    holds it after the state's own fields, and only `messages` (ranges) and `tools` (a number) follow,
    so its last occurrence is the one. The bytes between numbers go out as views of `lines`, not copied:
    a shard's trace lines hold every message it adds (tens of MB, once per run, in the process that
    merges while the workers read)."""
    if not base:
        out.write(lines)
        return
    view = memoryview(lines)
    position, size = 0, len(lines)
    while position < size:
        stop = lines.index(b"\n", position) + 1
        if in_row:
            start = lines.rindex(_SEGMENT_KEY, position, stop) + len(_SEGMENT_KEY)
        else:
            start = position + len(_LINE_START)
        end = lines.index(b",", start, stop)
        out.write(view[position:start])
        out.write(b"%d" % (int(lines[start:end]) + base))
        out.write(view[end:stop])
        position = stop


def _mapping(table: _Table, digests: list[bytes]) -> tuple[list[int], list[bool]]:
    """Where each of a segment's values lands in `table` (added to it when new), and which are new."""
    found = table.by_digest
    where, new = [], []
    for digest in digests:
        index = found.get(digest)
        if index is None:
            index = found[digest] = len(found)
            new.append(True)
        else:
            new.append(False)
        where.append(index)
    return where, new


def continued(states: bytes, traces: bytes, tables: Tables, messages: _Table, tools: _Table,
              segment: int) -> tuple[bytes, bytes]:
    """A shard's first segment (its rows and trace lines, numbered 0) written on in segment `segment`,
    whose tables are `messages` and `tools` (extended here): (rows, trace lines)."""
    message_at, message_new = _mapping(messages, tables.messages)
    tools_at, tools_new = _mapping(tools, tables.tools)
    number = str(segment).encode()
    lines = []
    for line in traces.split(b"\n")[1:-1]:   # the segment's opening line is the writer's already
        # {"segment":0,"message":3,"value":...} or {"segment":0,"tools":0,"value":...}
        number_end = line.index(b",", len(_LINE_START))
        kind_end = line.index(b'"', number_end + 2)
        value_at = line.index(b",", kind_end)
        local = int(line[kind_end + 2:value_at])
        at, new = (message_at, message_new) if line[number_end + 2:kind_end] == b"message" \
            else (tools_at, tools_new)
        if new[local]:
            lines.append(_LINE_START + number + line[number_end:kind_end + 2] + str(at[local]).encode()
                         + line[value_at:])
    rows = []
    for row in states.split(b"\n")[:-1]:
        cut = row.rfind(_SEGMENT_KEY)
        tail = orjson.loads(b"{" + row[cut + 1:])
        indices: list[int] = []
        for start, stop in tail["messages"]:
            indices += message_at[start:stop]
        rows.append(row[:cut] + b',"segment":' + number + b',"messages":'
                    + orjson.dumps(to_ranges(indices)) + b',"tools":' + str(tools_at[tail["tools"]]).encode()
                    + b"}")
    return b"".join(r + b"\n" for r in rows), b"".join(line + b"\n" for line in lines)


def table_of(digests: list[bytes], kind: bytes) -> _Table:
    """A writer's table that already holds `digests` (in index order), as written by another process."""
    table = _Table(kind)
    table.by_digest = {digest: n for n, digest in enumerate(digests)}
    return table


class MergingWriter(StateWriter):
    """A StateWriter that also appends shards (replay/ingest/parallel.py)."""

    def write_shard(self, shard: Shard) -> None:
        """Append states written apart as if written here one by one: a shard whose first trace is
        the one this writer's last state belongs to goes on in its segment."""
        if not shard.count:
            return
        states_out, traces_out = self._out
        goes_on = self._trace is not None and shard.first == self._trace
        states, traces, base = shard.states, shard.traces, self._segment + 1
        if goes_on:
            rows_end, lines_end = shard.first_end
            rows, lines = continued(states[:rows_end], traces[:lines_end], shard.first_tables,
                                    self._messages, self._tools, self._segment)
            states_out.write(rows)
            traces_out.write(lines)
            states, traces, base = states[rows_end:], traces[lines_end:], self._segment
        write_renumbered(traces_out, traces, base, in_row=False)
        write_renumbered(states_out, states, base, in_row=True)
        self._segment = base + shard.segments - 1
        self.states += shard.count
        self._trace = shard.last
        if not (goes_on and shard.segments == 1):   # else its tables were extended in place
            self._messages = table_of(shard.last_tables.messages, b"message")
            self._tools = table_of(shard.last_tables.tools, b"tools")
        self._previous = ([], [], [])
