"""Names in prose, run-wide (issue #58): the second pass over a run's states, once every file is read.

The first pass (teachers/person_names.py, in the redaction) finds names in a trace's prose and replaces
them there and, as words, in that trace's other strings. A name is often in another trace too, only in
tool output (a document `Read`, a `git log`) that the model does not read: on a real 381 MB corpus 6 of 16
sampled true names still reached a teacher that way. This pass replaces every name of the run's list
(`teachers.person_names.run_wide`) as a word in every string of states.jsonl and traces.jsonl, ids,
roles and tool names kept. It runs on the written files, after all of them are read, so what it replaces
depends on no worker count and no file order. Lines that hold none of the names (found for all of them in
one Hyperscan scan of the line) are copied as they are; a rewritten line is what the writer would have
written (ingestion/store.py: orjson, keys in order).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ingestion.store import STATES_FILE, TRACES_FILE
from teachers.hint_scan import HintScan, literal
from teachers.person_names import replace_people
from teachers.pseudonyms import Pseudonyms
from teachers.redact import STRUCTURAL
from teachers.redact_state import TOKEN_FIELDS


def replace_run_wide(out: Path, names: tuple[str, ...], settings: Pseudonyms) -> tuple[int, int]:
    """Every name of `names` (longest first) replaced as a word in OUT's states and trace table: (names
    replaced, counted once per trace and name, as the first pass counts; rollout states that lost their
    token ids because a message of theirs changed)."""
    if not names:
        return 0, 0
    which = _scanner(names)
    replaced: set[tuple[int, str]] = set()
    changed: dict[int, set[tuple[str, int]]] = {}   # segment -> its ("message" | "tools", index) rewritten

    def traces_line(line: bytes) -> bytes:
        found = which(line)
        if not found:
            return line
        row = orjson.loads(line)
        kind = "message" if "message" in row else "tools" if "tools" in row else None
        if kind is None:
            return line
        hit: set[str] = set()
        row["value"] = _walk(row["value"], found, settings, hit)
        if not hit:
            return line
        replaced.update((row["segment"], name) for name in hit)
        changed.setdefault(row["segment"], set()).add((kind, row[kind]))
        return orjson.dumps(row) + b"\n"

    dropped = 0

    def states_line(line: bytes) -> bytes:
        nonlocal dropped
        found = which(line)
        segment = _segment(line)
        if not found and segment not in changed:
            return line
        row = orjson.loads(line)
        hit: set[str] = set()
        if found:
            row["student_action"] = _walk(row["student_action"], found, settings, hit)
            replaced.update((row["segment"], name) for name in hit)
        touched = changed.get(row["segment"], set())
        history = ("tools", row["tools"]) in touched or any(
            ("message", i) in touched for start, stop in row["messages"] for i in range(start, stop))
        if not hit and not history:
            return line
        metadata = row.get("metadata") or {}
        if any(metadata.get(field) is not None for field in TOKEN_FIELDS):
            row["metadata"] = {**metadata, **{f: None for f in TOKEN_FIELDS if f in metadata}}
            dropped += 1
        elif not hit:
            return line
        return orjson.dumps(row) + b"\n"

    _rewrite(out / TRACES_FILE, traces_line)   # first: a state's history is its trace table's messages
    _rewrite(out / STATES_FILE, states_line)
    return len(replaced), dropped


def _scanner(names: tuple[str, ...]) -> Callable[[bytes], tuple[str, ...]]:
    """`which(line)`: the names (in `names`' order) whose UTF-8 bytes occur in `line`. JSON as orjson
    writes it holds a name's characters as they are (no escapes: a name is letters, spaces, `'` and `-`)."""
    scan = HintScan({name: literal(name) for name in names})

    def which(line: bytes) -> tuple[str, ...]:
        found = scan.in_bytes(line)
        return tuple(name for name in names if name in found) if found else ()

    return which


def _segment(line: bytes) -> int:
    # A state row ends with its segment, its message ranges and its tool list (ingestion/store.py).
    at = line.rfind(b',"segment":')
    return int(line[at + 11:line.index(b",", at + 11)]) if at >= 0 else -1


def _walk(value: Any, names: tuple[str, ...], settings: Pseudonyms, hit: set[str]) -> Any:
    if isinstance(value, str):
        if not any(name in value for name in names):
            return value
        text, _, replaced = replace_people(value, [], settings, names)
        hit.update(replaced)
        return text
    if isinstance(value, dict):
        return {k: v if k in STRUCTURAL else _walk(v, names, settings, hit) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, names, settings, hit) for v in value]
    return value


def _rewrite(path: Path, change: Callable[[bytes], bytes]) -> None:
    """`path` with each line through `change`, replaced in one move (the run's own folder: the previous
    good output is elsewhere until the run swaps in)."""
    temp = path.with_name(f".{path.name}.names.tmp")
    try:
        with open(path, "rb") as lines, open(temp, "wb", buffering=1 << 20) as written:
            for line in lines:
                written.write(change(line))
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
