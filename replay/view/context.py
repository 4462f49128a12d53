"""Each trace's messages as display items written once, in script files that any state's page loads.

A state's context is a subsequence of its trace's messages, and the run stores them once per trace
segment (`ingestion.store`): the view does the same. Every message of a segment becomes one display
item (`content.message_item`) in `data/c<k>.js` files of about `CHUNK_CHARS` characters, and a state
names the ranges of items it shows (its own ranges in states.jsonl, newest first within `PAGE_BUDGET`)
and the files they lie in. The view of a long session is about the size of its run
folder, not its square, and each message is converted once, however many states show it.
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path
from typing import Any

import orjson

from replay.view.content import PAGE_BUDGET, message_item

CHUNK_CHARS = 400_000          # characters of display items per script file (each file stays < 2 MB)


def script(key: str, value: bytes) -> bytes:
    """A data/ file: JSON (already encoded) filed under `key` for the page's scripts, safe whatever the
    strings hold (orjson leaves "</" as it is: escaped here, so no string can end a script early).

    >>> script("c0", b'[[0,0,["</script>"]]]')
    b'(window.REPLAY_FILES = window.REPLAY_FILES || {})["c0"] = [[0,0,["<\\\\/script>"]]];\\n'
    """
    return (b'(window.REPLAY_FILES = window.REPLAY_FILES || {})["' + key.encode() + b'"] = '
            + value.replace(b"</", b"<\\/") + b";\n")


def budget(ranges: list[list[int]], sizes: list[int], system: bool,
           limit: int = PAGE_BUDGET) -> tuple[list[list[int]], int]:
    """The ranges a page shows, and how many older messages it leaves out: newest first until `limit`
    characters are spent (the system prompt, when first, always shown; at least one message besides).
    `sizes` are cumulative: item i is `sizes[i + 1] - sizes[i]` characters.

    >>> budget([[0, 4]], [0, 5, 15, 25, 35], True, limit=30)
    ([[0, 1], [2, 4]], 1)
    >>> budget([[0, 2], [5, 6]], [0, 1, 2, 3, 4, 5, 6], False)
    ([[0, 2], [5, 6]], 0)
    """
    if sum(sizes[stop] - sizes[start] for start, stop in ranges) <= limit:
        return ranges, 0
    indices = [i for start, stop in ranges for i in range(start, stop)]
    head, body = (indices[:1], indices[1:]) if system else ([], indices)
    spent, kept = sum(sizes[i + 1] - sizes[i] for i in head), 0
    for index in reversed(body):
        size = sizes[index + 1] - sizes[index]
        if kept and spent + size > limit:
            break
        spent += size
        kept += 1
    shown: list[list[int]] = []
    for index in head + body[len(body) - kept:]:
        if shown and shown[-1][1] == index:
            shown[-1][1] += 1
        else:
            shown.append([index, index + 1])
    return shown, len(body) - kept


class TraceItems:
    """The display items of the trace being read, written to `data/c<k>.js` files as they fill: a file
    holds parts, [segment, first item, [items]], of one or more traces (a short trace does not get a
    file of its own: a run of 500-odd traces is 60 files, not 500)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.sizes: list[tuple[str, int]] = []     # (file, bytes) per file written
        self.segment: int | None = None
        self._file = 0                       # number of the open file
        self._parts: list[list[Any]] = []    # the open file's parts
        self._chars = 0
        self._open_segment()

    def _open_segment(self) -> None:
        self._roles: list[str] = []
        self._sizes = [0]                    # cumulative display sizes
        self._starts: list[int] = []         # first item of each part of the segment
        self._files: list[int] = []          # the file of each part

    def context(self, segment: int, messages: list[dict[str, Any]],
                ranges: list[list[int]]) -> dict[str, Any]:
        """What a state's page needs to draw its context: {seg, files, ranges, system, dropped}.
        `messages` is the segment's message table as read so far (segments come one after another)."""
        if segment != self.segment:
            self.segment = segment
            self._open_segment()
        for message in messages[len(self._roles):]:
            self._add(message)
        system = bool(ranges) and self._roles[ranges[0][0]] == "system"
        shown, dropped = budget(ranges, self._sizes, system)
        starts, files = self._starts, set()
        for start, stop in shown:
            files.update(self._files[bisect_right(starts, start) - 1:bisect_right(starts, stop - 1)])
        return {"seg": segment, "files": sorted(files), "ranges": shown, "system": system, "dropped": dropped}

    def _add(self, message: dict[str, Any]) -> None:
        item, size = message_item(message)
        if self._parts and self._chars + size > CHUNK_CHARS:
            self._flush()
        if not self._parts or self._parts[-1][0] != self.segment:
            self._parts.append([self.segment, len(self._roles), []])
            self._starts.append(len(self._roles))
            self._files.append(self._file)
        self._parts[-1][2].append(item)
        self._roles.append(item[0])
        self._sizes.append(self._sizes[-1] + size)
        self._chars += size

    def _flush(self) -> None:
        if not self._parts:
            return
        key = f"c{self._file}"
        data = script(key, orjson.dumps(self._parts))
        (self.folder / f"{key}.js").write_bytes(data)
        self.sizes.append((f"data/{key}.js", len(data)))
        self._file += 1
        self._parts, self._chars = [], 0

    def close(self) -> None:
        """Write the open file."""
        self._flush()
