"""Each state's record (`pages.state_record`) written to `data/` in blocks that the state page loads.

One page, `state.html#N`, draws any state: `data/where.js` lists the first state number of every block
`data/s<first>.js` (blocks of about `BLOCK_CHARS` characters, so none grows past its budget), the page
finds the block holding N, and the record there names the trace's item files its context is in. A record
links to its trace's turns before and after (`prev`, `next`: state numbers), so each is held until the
next state is known.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from replay.view.context import script

BLOCK_CHARS = 300_000          # characters of records per block file


class StateRecords:
    """Collects the records of consecutive states and writes them block by block, then `where.js`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.sizes: list[tuple[str, int]] = []     # (file, bytes) per file written
        self.firsts: list[int] = []                # the first state of each block written
        self._block: list[bytes] = []
        self._chars = 0
        self._held: tuple[int, str, dict[str, Any]] | None = None   # (number, trace, record)

    def add(self, number: int, trace: str, record: dict[str, Any]) -> None:
        """The record of state `number` (states come in the run's order, numbered from 0)."""
        if self._held is not None:
            held_number, held_trace, held = self._held
            if held_trace == trace:
                held["next"], record["prev"] = number, held_number
            self._store(held_number, held)
        self._held = (number, trace, record)

    def _store(self, number: int, record: dict[str, Any]) -> None:
        data = orjson.dumps(record)
        if self._block and self._chars + len(data) > BLOCK_CHARS:
            self._flush()
        if not self._block:
            self.firsts.append(number)
        self._block.append(data)
        self._chars += len(data)

    def _flush(self) -> None:
        if not self._block:
            return
        key = f"s{self.firsts[-1]}"
        self._write(f"{key}.js", script(key, b"[" + b",".join(self._block) + b"]"))
        self._block, self._chars = [], 0

    def _write(self, name: str, data: bytes) -> None:
        (self.folder / name).write_bytes(data)
        self.sizes.append((f"data/{name}", len(data)))

    def close(self) -> None:
        """Write the last records and `where.js`."""
        if self._held is not None:
            self._store(self._held[0], self._held[2])
            self._held = None
        self._flush()
        self._write("where.js", b"window.REPLAY_WHERE = " + orjson.dumps(self.firsts) + b";\n")
