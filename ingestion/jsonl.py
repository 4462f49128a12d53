"""Line-by-line JSONL reading that survives what real session logs contain.

Half-written last lines, crash stubs with the next record glued on, two records on one
line, non-UTF-8 bytes and non-object lines are each counted by reason; every record that
can be recovered is returned.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ingestion.stats import IngestStats

_DECODER = json.JSONDecoder()


def split_objects(text: str) -> tuple[list[Any], int]:
    """Every complete JSON value on a broken line, and how many fragments were lost.

    >>> split_objects('{"a": 1}{"b": 2}')
    ([{'a': 1}, {'b': 2}], 0)
    >>> split_objects('{"type":"pr-link","prNu{"a": 1}')
    ([{'a': 1}], 1)
    """
    values: list[Any] = []
    lost = 0
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        try:
            value, i = _DECODER.raw_decode(text, i)
            values.append(value)
            continue
        except json.JSONDecodeError:
            lost += 1
        # A crash stub is followed by the next record, which starts a fresh object.
        nxt = text.find('{"', i + 1)
        if nxt < 0:
            break
        i = nxt
    return values, lost


def iter_records(path: Path, stats: IngestStats) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, record) for every JSON object recoverable from `path`."""
    name = str(path)
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, 1):
            if raw.isspace():
                continue
            stats.lines += 1
            try:
                value = orjson.loads(raw)  # orjson skips surrounding whitespace; strip() would copy MBs
            except orjson.JSONDecodeError:
                yield from _recover(raw.strip(), raw.endswith(b"\n"), name, lineno, stats)
                continue
            if isinstance(value, dict):
                yield lineno, value
            else:
                stats.problem(name, lineno, "not_an_object")


def _recover(line: bytes, complete: bool, name: str, lineno: int,
             stats: IngestStats) -> Iterator[tuple[int, dict[str, Any]]]:
    repair = "nonstandard_json"  # e.g. lone surrogate escapes, which orjson refuses
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        repair = "invalid_utf8"
        text = line.decode("utf-8", errors="replace")
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
        else:
            if isinstance(value, dict):
                stats.problem(name, lineno, "invalid_utf8", action="repaired")
                yield lineno, value
                return
    values, lost = split_objects(text)
    records = [v for v in values if isinstance(v, dict)]
    if not records:
        stats.problem(name, lineno, "truncated_line" if not complete else "undecodable_line")
        return
    if lost:
        stats.problem(name, lineno, "truncated_record")
    if len(records) > 1:
        stats.problem(name, lineno, "concatenated_records", action="repaired")
    elif not lost:
        stats.problem(name, lineno, repair, action="repaired")
    for record in records:
        yield lineno, record
