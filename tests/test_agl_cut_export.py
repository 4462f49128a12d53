"""Issue #55 item 5: an agent-lightning Gateway export cut in the middle of a rollout's line (a copy cut
short) is one count, `agl_export_cut_short`, and its half line gives no record: the objects complete
inside it (a rollout's `input`, a call's tool schema) are pieces of the cut record, not records glued
on. Read from the saved export in tests/data/agent_lightning/gateway/ (agentlightning 1.0.2's Gateway,
tests/agl_fixtures.py), so no Gateway is needed here; tests/test_agl_gateway.py cuts a fresh one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson

from ingestion.jsonl import iter_records
from ingestion.stats import IngestStats
from replay.run import main

EXPORT = Path(__file__).resolve().parent / "data" / "agent_lightning" / "gateway" / "rollouts.agl.jsonl"
LINES = EXPORT.read_bytes().splitlines(keepends=True)
CUT = 3   # the third rollout's line (0: the export's header, 1 and 2: the first two rollouts)


def _cuts(line: bytes) -> list[int]:
    """Where to cut `line`: right after every `}` and `]` (an object or list inside it just complete:
    the cut that recovered the most pieces), and every 97th byte."""
    after = [m.end() for m in re.finditer(rb"[}\]]", line[:-2])]
    return sorted(set(after) | set(range(1, len(line) - 1, 97)))


def test_every_cut_of_a_rollout_line_gives_no_record_and_one_truncated_line(tmp_path: Path) -> None:
    line = LINES[CUT]
    path = tmp_path / "cut.agl.jsonl"
    cuts = _cuts(line)
    assert len(cuts) > 300
    wrong = []
    for cut in cuts:
        path.write_bytes(LINES[0] + line[:cut])
        stats = IngestStats()
        records = [record for _, record in iter_records(path, stats)]
        problems = [(p["line"], p["reason"], p["action"]) for p in stats.problems]
        if records != [orjson.loads(LINES[0])] or problems != [(2, "truncated_line", "skipped")]:
            wrong.append((cut, len(records), problems))
    assert wrong == []


def test_a_cut_export_is_one_count_and_keeps_the_rollouts_before_it(tmp_path: Path) -> None:
    line = LINES[CUT]
    cut = [m.end() for m in re.finditer(rb"\}", line)][len(line) // 2000]   # right after an object
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "rollouts.agl.jsonl").write_bytes(b"".join(LINES[:CUT]) + line[:cut])
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / "rollouts.agl.jsonl").write_bytes(b"".join(LINES[:CUT + 1]) + LINES[-1])
    reports = {}
    for name in ("cut", "whole"):
        out = tmp_path / f"out-{name}"
        assert main(["--source", str(tmp_path / name), "--out", str(out), "--dry-run"]) == 0
        reports[name] = json.loads((out / "report.json").read_text())
    cut_report, whole = reports["cut"], reports["whole"]
    assert cut_report["repaired_lines"] == {"agl_export_cut_short": 1}      # the cut, once
    assert cut_report["skipped_lines"] == {"truncated_line": 1}              # the half line it left
    assert cut_report["record_types"] == {"agl_gateway_export": 1, "agl_rollout": CUT - 1}
    assert cut_report["skipped_records"] == {}                               # no phantom record
    # the rollouts before the cut, whole: the states of the same file without the cut line's rollout
    assert whole["repaired_lines"] == {} and whole["skipped_lines"] == {}
    assert 0 < cut_report["states"] < whole["states"]
    assert cut_report["traces"] == whole["traces"] - 1
