"""Atomic output files: write beside the target, then `os.replace`, so a reader (or a killed run)
never sees half a file."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

# The run's own files, written by replay.pipeline: named here so that readers (the view) need not
# import the pipeline, which brings the teachers package and its clients with it.
REPORT_FILE = "report.json"
PROPOSALS_FILE = "proposals.jsonl"
CONFIG_FILE = "run.json"  # the run's settings, for replay.ablate


def temp_path(path: Path) -> Path:
    """A unique sibling of `path` to write into before replacing it.

    >>> temp_path(Path("out/report.json")).parent
    PosixPath('out')
    """
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")


def file_sha256(path: Path) -> str | None:
    """The SHA-256 of a file read in pieces (its hex digest), or None when there is no such file."""
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_bytes(path: Path, data: bytes) -> None:
    tmp = temp_path(path)
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, data: Any) -> None:
    write_bytes(path, orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))


def write_lines(path: Path, lines: Iterable[bytes]) -> None:
    tmp = temp_path(path)
    with open(tmp, "wb") as handle:
        handle.writelines(lines)
    os.replace(tmp, path)


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    write_lines(path, (orjson.dumps(record) + b"\n" for record in records))


def replace_dir(tmp: Path, final: Path) -> None:
    """Put the finished folder `tmp` where `final` is. `os.replace` cannot overwrite a non-empty folder,
    so the old one is moved aside first: readers only ever see a complete old or a complete new folder
    (and, for a moment, none)."""
    old = final.with_name(f".{final.name}.old.{uuid.uuid4().hex}")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
