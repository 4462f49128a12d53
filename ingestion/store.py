"""States on disk in linear space: each message stored once per trace, one reader for every consumer.

A state's messages are a subsequence of its trace's messages (decision C1: every transformation is a
pure per-message function, trimming drops whole old exchanges), so a run writes two files:

- `traces.jsonl`: the trace table, one line per item, grouped in *segments* (the states of one trace
  written one after another; normally one segment per trace):
  `{"segment": 0, "trace_id": "...", "source": "claude_code"}` opens a segment,
  `{"segment": 0, "message": 3, "value": {...}}` is the segment's message 3 (system prompts included),
  `{"segment": 0, "tools": 0, "value": [...]}` is its tool list 0.
- `states.jsonl`: one state per line, the TraceState without its `messages` and `tools`, plus
  `"segment"`, `"messages": [[start, stop], ...]` (half-open ranges of message indices, in order) and
  `"tools"` (a tool-list index).

`load_states(OUT)` rebuilds the TraceStates, holding one segment in memory at a time. Messages of one
trace are shared between its states: treat them as read-only.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from ingestion.exact import same_prefix
from ingestion.schema import Action, ReplayError, ToolCall, TraceState

STATES_FILE = "states.jsonl"
TRACES_FILE = "traces.jsonl"
_BUFFER = 1 << 20

Message = dict[str, Any]


class StoreError(ReplayError):
    """states.jsonl / traces.jsonl are not what this writer wrote (edited, truncated, mismatched)."""


def to_ranges(indices: list[int]) -> list[list[int]]:
    """Consecutive indices as half-open [start, stop) ranges.

    >>> to_ranges([0, 1, 2, 5, 6, 3])
    [[0, 3], [5, 7], [3, 4]]
    >>> to_ranges([])
    []
    """
    ranges: list[list[int]] = []
    start, n = 0, len(indices)
    while start < n:
        first, length = indices[start], 1
        while length < 8 and start + length < n and indices[start + length] == first + length:
            length += 1
        if length == 8:
            # A long run (a history is mostly a few): find its end by galloping with slice
            # comparisons, C loops, rather than looking at every index in Python.
            step = 8
            while step:
                end = start + length + step
                expected = range(first + length, first + end - start)
                if end <= n and indices[start + length:end] == list(expected):
                    length += step
                    step *= 2
                else:
                    step //= 2
        ranges.append([first, first + length])
        start += length
    return ranges


class _Table:
    """One segment's distinct values (messages, or tool lists) as the writer stores them.

    A value already stored is found by identity first (states of a trace share their message objects),
    then by content, so a producer that rebuilds equal messages still stores each once.
    """

    def __init__(self, kind: bytes) -> None:
        self.kind = kind
        self.by_id: dict[int, int] = {}
        self.by_digest: dict[bytes, int] = {}
        self.keep: list[Any] = []   # holds every object whose id() is a key, so no id is reused

    def index(self, value: Any, segment: bytes, out: IO[bytes],
              transform: Callable[[Any], Any] | None = None) -> int:
        found = self.by_id.get(id(value))
        if found is not None:
            return found
        raw = orjson.dumps(value)
        digest = hashlib.blake2b(raw, digest_size=16).digest()
        found = self.by_digest.get(digest)
        if found is None:
            found = self.by_digest[digest] = len(self.by_digest)
            if transform is not None:   # pure, so once per distinct value is enough
                raw = orjson.dumps(transform(value))
            out.write(b'{"segment":%b,"%b":%d,"value":' % (segment, self.kind, found))
            out.write(raw)   # not joined: a message can be megabytes
            out.write(b"}\n")
        self.by_id[id(value)] = found
        self.keep.append(value)
        return found


# orjson refuses what pydantic's JSON mode would convert its own way (dates, dataclasses, subclasses of
# str/int/dict/list); every plain JSON value (and tuples, enums, UUIDs) comes out as pydantic's does.
_PLAIN = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def _plain_row(state: TraceState) -> dict[str, Any] | None:
    """`state.model_dump(mode="json", exclude={"messages", "tools"})` without pydantic's walk (a tenth
    of writing a state on real sessions, issue #39), or None for an action that is not plain Action
    and ToolCall objects. Values are left as they are: orjson writes them (_PLAIN)."""
    action = state.student_action
    if type(action) is not Action:
        return None
    calls = []
    for call in action.tool_calls:
        if type(call) is not ToolCall:
            return None
        calls.append({"id": call.id, "name": call.name, "arguments": call.arguments})
    return {"state_id": state.state_id, "trace_id": state.trace_id, "turn": state.turn,
            "source": state.source, "student_action": {"content": action.content, "tool_calls": calls,
                                                       "thinking": action.thinking},
            "student_model": state.student_model, "metadata": state.metadata}


class _Writer:
    """Writes states into two byte streams (states rows, trace table), numbering segments from 0."""

    def __init__(self, outs: list[IO[bytes]], transform: Callable[[Message], Message] | None = None) -> None:
        self.transform = transform
        self.states = 0
        self._out = outs
        self._segment = -1
        self._trace: tuple[str, str] | None = None
        self._messages = _Table(b"message")
        self._tools = _Table(b"tools")
        # The previous state of the segment: (messages, their indices, their ranges).
        self._previous: tuple[list[Message], list[int], list[list[int]]] = ([], [], [])

    def write(self, state: TraceState) -> None:
        states_out, traces_out = self._out
        if self._trace != (state.trace_id, state.source):
            self._open_segment(state, traces_out)
        tools = self._tools.index(state.tools, str(self._segment).encode(), traces_out)
        ranges = self._ranges(state.messages, traces_out)
        tail = {"segment": self._segment, "messages": ranges, "tools": tools}
        row = _plain_row(state)
        try:
            line = orjson.dumps({**row, **tail}, option=_PLAIN) if row is not None else None
        except TypeError:   # a value JSON has no plain form for: pydantic's, as before
            line = None
        if line is None:
            line = orjson.dumps({**state.model_dump(mode="json", exclude={"messages", "tools"}), **tail})
        states_out.write(line + b"\n")
        self.states += 1

    def _ranges(self, messages: list[Message], out: IO[bytes]) -> list[list[int]]:
        """The ranges of `messages`. A history usually extends the previous state's: then only what it
        adds is looked at (the shared part is one list comparison, mostly of identical objects), so a
        state costs what it adds, not its whole history again. The same JSON, not `==`
        (ingestion/exact.py): a message resent with `1.0` for `1` is stored as it was sent."""
        previous, known, known_ranges = self._previous
        if same_prefix(messages, previous):
            tail = self._indices(messages[len(previous):], out)
            indices = known + tail
            ranges = list(known_ranges)
            added = to_ranges(tail)
            if added and ranges[-1][1] == added[0][0]:
                ranges[-1] = [ranges[-1][0], added[0][1]]
                added = added[1:]
            ranges += added
        else:
            indices = self._indices(messages, out)
            ranges = to_ranges(indices)
        self._previous = (messages, indices, ranges)
        return ranges

    def _indices(self, messages: list[Message], out: IO[bytes]) -> list[int]:
        # Most messages are stored already, found by identity in C loops; only the rest go one by one.
        table = self._messages
        indices = list(map(table.by_id.get, map(id, messages)))
        segment = str(self._segment).encode()
        position = 0
        try:
            while True:   # each search starts where the last stopped: one pass over the list
                position = indices.index(None, position)
                indices[position] = table.index(messages[position], segment, out, self.transform)
        except ValueError:
            pass
        return indices

    def _open_segment(self, state: TraceState, out: IO[bytes]) -> None:
        # Only one trace's tables are held: a trace met again later opens a new segment.
        self._segment += 1
        self._trace = (state.trace_id, state.source)
        self._messages = _Table(b"message")
        self._tools = _Table(b"tools")
        self._previous = ([], [], [])
        out.write(orjson.dumps({"segment": self._segment, "trace_id": state.trace_id,
                                "source": state.source}) + b"\n")


class StateWriter(_Writer):
    """Write states to `folder/states.jsonl` + `folder/traces.jsonl`, each replaced atomically on close.

    `transform` (optional) is applied once to each distinct message before it is stored, e.g. a
    redaction pass: per message, as decision C1 requires, never per state.
    """

    def __init__(self, folder: Path, transform: Callable[[Message], Message] | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._targets = (folder / STATES_FILE, folder / TRACES_FILE)
        self._temps = tuple(p.with_name(f".{p.name}.{uuid.uuid4().hex}.tmp") for p in self._targets)
        super().__init__([open(p, "wb", buffering=_BUFFER) for p in self._temps], transform)

    def close(self) -> None:
        """Flush and move both files into place (traces first: a state never points at nothing)."""
        for handle in self._out:
            handle.close()
        for temp, target in reversed(list(zip(self._temps, self._targets, strict=True))):
            os.replace(temp, target)

    def abort(self) -> None:
        for handle in self._out:
            handle.close()
        for temp in self._temps:
            temp.unlink(missing_ok=True)

    def __enter__(self) -> StateWriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def write_states(states: Iterator[TraceState] | list[TraceState], folder: Path) -> int:
    """Every state into `folder`; returns how many."""
    with StateWriter(folder) as writer:
        for state in states:
            writer.write(state)
    return writer.states


class Segments:
    """Reads traces.jsonl forward, holding the current segment's messages and tool lists."""

    def __init__(self, handle: IO[bytes], name: str) -> None:
        self.handle = handle
        self.name = name
        self.segment = -1
        self.messages: list[Message] = []
        self.tools: list[list[dict[str, Any]]] = []

    def need(self, segment: int, message: int, tools: int) -> None:
        while self.segment < segment or (self.segment == segment and (
                message >= len(self.messages) or tools >= len(self.tools))):
            line = self.handle.readline()
            if not line:
                raise StoreError(f"{self.name} ends before segment {segment} is complete: it does not "
                                 f"belong to this states.jsonl (rewrite both with replay.run)")
            item = orjson.loads(line)
            if item["segment"] != self.segment:
                self.segment = item["segment"]
                self.messages, self.tools = [], []
            if "message" in item:
                self.messages.append(item["value"])
            elif "tools" in item:
                self.tools.append(item["value"])


def state_rows(path: Path) -> Iterator[dict[str, Any]]:
    """states.jsonl's lines as dicts (id, trace, action, metadata, ranges), no message rebuilt: for
    readers that need the light fields of every state (`--select`, hindsight). `path` is the run's
    folder or its states.jsonl."""
    path = Path(path)
    with open(path / STATES_FILE if path.is_dir() else path, "rb") as handle:
        for line in handle:
            if not line.isspace():
                yield orjson.loads(line)


def load_states(path: Path) -> Iterator[TraceState]:
    """The TraceStates of a run: `path` is its folder (or its states.jsonl), as `replay.run --out` wrote it.

    Streams: memory holds one trace's messages. Older runs (one full state per line) still load.
    """
    path = Path(path)
    states_path = path / STATES_FILE if path.is_dir() else path
    traces_path = states_path.with_name(TRACES_FILE)
    try:
        states = open(states_path, "rb")
    except OSError as error:
        raise StoreError(f"cannot read {states_path}: {error.strerror or error}") from error
    with states:
        segments: Segments | None = None
        number = 0
        try:
            for line in states:
                number += 1
                if line.isspace():
                    continue
                row = orjson.loads(line)
                if "segment" not in row:          # written before linear storage
                    yield TraceState.model_validate(row)
                    continue
                if segments is None:
                    segments = Segments(open(traces_path, "rb"), str(traces_path))
                yield rebuild_state(row, segments)
        except (orjson.JSONDecodeError, KeyError, TypeError, IndexError, ValueError) as error:
            raise StoreError(f"{states_path}:{number}: not a state this version wrote ({error})") from error
        except OSError as error:
            raise StoreError(f"cannot read {traces_path}: {error.strerror or error}") from error
        finally:
            if segments is not None:
                segments.handle.close()


def rebuild_state(row: dict[str, Any], segments: Segments) -> TraceState:
    """The TraceState of a states.jsonl row (consumed), its messages and tools from `segments`."""
    ranges = row.pop("messages")
    last = max((stop for _, stop in ranges), default=0) - 1
    tools = row.pop("tools")
    segments.need(row.pop("segment"), last, tools)
    table = segments.messages
    messages: list[Message] = []
    for start, stop in ranges:
        messages.extend(table[start:stop])
    row["messages"] = messages
    row["tools"] = segments.tools[tools]
    row["student_action"] = Action.model_validate(row["student_action"])
    # The parts are validated (the action) or were written from validated states (the rest):
    # re-validating every history message of every state would cost more than reading them.
    return TraceState.model_construct(**row)
