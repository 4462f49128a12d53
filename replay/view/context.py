"""Each trace's pages as data written once: script files that the state pages of that trace load.

A state's context is a subsequence of its trace's messages (the run stores them once: ingestion.store),
so the view does the same: every distinct message of a trace becomes one display item in `data/`
script files of about `CHUNK_CHARS` characters, beside each state's own record (verdict, actions,
groups, diff: `pages.state_record`). A state page is a small shell naming its number, the ranges of
items it shows (newest first within `PAGE_BUDGET`) and the chunk files they lie in; `assets/state.js`
draws it all with `textContent`. A page no longer repeats its trace's context: the view of a long
session is about the size of its run folder, not its square, and no template runs per state.

Messages are known by identity: `load_states` hands the states of one trace the same message objects,
so a message met again is a dictionary look-up, not a new conversion.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ingestion.store import to_ranges
from replay.view.content import PAGE_BUDGET, Shown, shown_message

CHUNK_CHARS = 400_000          # characters of display items per script file (each file stays < 2 MB)


@dataclass
class Context:
    """What a state page needs to draw its context."""

    ranges: list[list[int]]   # item indices of the trace, half-open, oldest first; the system prompt too
    system: bool              # the first item shown is the system prompt
    dropped: int              # older messages left out for the page's budget
    scripts: list[str]        # data/ files holding those items and the state's record, in order


def item(shown: Shown) -> list[Any]:
    """A display item as the script files hold it: [role, text, note, [[tool, arguments], ...]].

    >>> from replay.view.content import Call
    >>> item(Shown(role="tool", text="ok", note="c1", calls=(Call("Bash", "{}"),)))
    ['tool', 'ok', 'c1', [['Bash', '{}']]]
    """
    return [shown.role, shown.text, shown.note, [[call.name, call.arguments] for call in shown.calls]]


class TraceData:
    """Collects the display items of the trace being built and writes them in chunks to `data/`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.trace = -1
        self.sizes: list[tuple[str, int]] = []     # (file, bytes) per chunk written
        self._key: object = None
        self._reset()

    def _reset(self) -> None:
        self._index: dict[int, int] = {}     # id(message) -> item index
        self._keep: list[Any] = []           # the messages whose ids are keys (ids stay unique)
        self._size: list[int] = []           # display size per item
        self._chunk_of: list[int] = []       # chunk number per item
        self._pending: list[list[Any]] = []  # items of the open chunk
        self._records: list[bytes] = []      # `"number":{record}` of the open chunk, encoded
        self._first = 0                      # index of the open chunk's first item
        self._chars = 0
        self._chunk = 0

    def add_state(self, number: int, trace_id: str, messages: list[dict[str, Any]],
                  record: dict[str, Any]) -> Context:
        """Store a state's record and the items of its context; what its page must load. A new trace
        flushes the last one."""
        if trace_id != self._key:
            self.close()
            self._key, self.trace = trace_id, self.trace + 1
        indices = [self._add(message) for message in messages]
        system = bool(messages) and messages[0].get("role") == "system"
        body = indices[1:] if system else indices
        spent = self._size[indices[0]] if system else 0
        kept = 0
        for index in reversed(body):            # newest first until the page's budget is spent
            if kept and spent + self._size[index] > PAGE_BUDGET:
                break
            spent += self._size[index]
            kept += 1
        shown = ([indices[0]] if system else []) + body[len(body) - kept:]
        encoded = orjson.dumps(record)
        self._records.append(b'"%d":%s' % (number, encoded))
        self._chars += len(encoded)
        chunks = {self._chunk_of[i] for i in shown} | {self._chunk}
        return Context(ranges=to_ranges(shown), system=system, dropped=len(body) - kept,
                       scripts=[self._name(c) for c in sorted(chunks)])

    def _add(self, message: dict[str, Any]) -> int:
        found = self._index.get(id(message))
        if found is not None:
            return found
        shown = shown_message(message)
        if (self._pending or self._records) and self._chars + shown.size > CHUNK_CHARS:
            self._flush()
            self._chunk += 1
        index = self._index[id(message)] = len(self._size)
        self._keep.append(message)
        self._size.append(shown.size)
        self._chunk_of.append(self._chunk)
        self._pending.append(item(shown))
        self._chars += shown.size
        return index

    def _name(self, chunk: int) -> str:
        return f"t{self.trace}-{chunk}.js"

    def _flush(self) -> None:
        if not self._pending and not self._records:
            return
        name = self._name(self._chunk)
        # orjson leaves "</" as it is: escaped here, no string can end a script element early.
        body = (b"[%d,%s,{%s}]" % (self._first, orjson.dumps(self._pending), b",".join(self._records))
                ).replace(b"</", b"<\\/")
        data = b"(window.REPLAY_PAGES = window.REPLAY_PAGES || []).push(" + body + b");\n"
        (self.folder / name).write_bytes(data)
        self.sizes.append((f"data/{name}", len(data)))
        self._first += len(self._pending)
        self._pending, self._records, self._chars = [], [], 0

    def close(self) -> None:
        """Write the open chunk and forget the trace."""
        self._flush()
        self._reset()
