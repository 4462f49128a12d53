"""Plain files are read in large pieces and cut into lines as views (ingestion.jsonl._lines): whatever
the pieces' size, a file gives the records, line numbers and counted problems that reading it line by
line gives (the gzip path does that, so the same bytes gzipped are the reference)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ingestion import jsonl
from ingestion.jsonl import BOM, iter_records
from ingestion.stats import IngestStats

LONG = "x" * 5000   # a record longer than many pieces


def tricky() -> bytes:
    records = [json.dumps({"n": n, "text": LONG if n == 3 else f"r{n}"}).encode() for n in range(6)]
    return b"".join([
        BOM + records[0] + b"\n",              # a byte-order mark
        b"\n", b"   \t\n", b"\r\n",            # blank and whitespace-only lines: not counted
        records[1] + b"\r\n",                  # CRLF
        b'{"half": "writ' + b"\n",             # a truncated line
        records[2] + records[3] + b"\n",       # two records on one line
        b"[1, 2]\n",                           # not an object
        b'{"bad": "\xff\xfe"}\n',              # not UTF-8
        records[4] + b"\n",
        BOM + records[5],                      # a mark inside, and no newline at the end
    ])


def read(path: Path) -> tuple[list[tuple[int, dict]], IngestStats]:
    stats = IngestStats()
    records = list(iter_records(path, stats))
    return records, stats


@pytest.mark.parametrize("piece", [1, 2, 7, 64, 4999, 1 << 20])
def test_any_piece_size_reads_as_line_by_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              piece: int) -> None:
    data = tricky()
    (tmp_path / "s.jsonl.gz").write_bytes(gzip.compress(data))
    (tmp_path / "s.jsonl").write_bytes(data)
    expected, reference = read(tmp_path / "s.jsonl.gz")
    monkeypatch.setattr(jsonl, "_CHUNK", piece)
    records, stats = read(tmp_path / "s.jsonl")
    assert records == expected
    assert [n for n, _ in records] == [1, 5, 7, 7, 9, 10, 11]   # line 9 repaired (invalid UTF-8)
    assert (stats.lines, stats.skipped_lines, stats.repaired_lines) == \
        (reference.lines, reference.skipped_lines, reference.repaired_lines)
    assert [(p["line"], p["reason"]) for p in stats.problems] == \
        [(p["line"], p["reason"]) for p in reference.problems]
    assert stats.lines == 8 and stats.skipped_lines == {"undecodable_line": 1, "not_an_object": 1}
