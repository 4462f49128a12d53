"""loop.md's table from loop.json alone: the tool-call rate beside `valid` (#57), which counts prose."""

from __future__ import annotations

from pathlib import Path

from replay.loop.ledger import Ledger
from replay.loop.report import markdown, rows


def rate(value: float, n: int = 20) -> dict[str, float | int]:
    return {"value": value, "low": max(0.0, value - 0.1), "high": min(1.0, value + 0.1), "n": n}


def test_tool_calls_beside_valid_with_their_paired_difference(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, {"command": "python -m replay.loop"})
    figures = {"round-0": {"consensus_intent": rate(0.1), "valid": rate(1.0), "tool_call": rate(0.2)},
               "round-1": {"consensus_intent": rate(0.3), "valid": rate(1.0), "tool_call": rate(0.6)}}
    ledger.data["rounds"] = {
        "0": {"stages": {"eval": {"seconds": 5, "models": {"round-0": figures["round-0"]}}}},
        "1": {"stages": {"eval": {"seconds": 6, "models": figures, "differences": {"round-1 - round-0": {
            "consensus_intent": rate(0.2), "valid": rate(0.0), "tool_call": rate(0.4)}}},
            "pairs": {"seconds": 1, "pairs": 12}}}}
    table = rows(ledger)
    assert [r["tool_call"]["value"] for r in table] == [0.2, 0.6]
    assert table[1]["tool_call_diff"]["value"] == 0.4
    text = markdown(ledger)
    header = next(line for line in text.splitlines() if line.startswith("| round | resolve"))
    assert "valid (prose counts) | Δ vs round 0 | tool calls | Δ vs round 0" in header
    line = next(line for line in text.splitlines() if line.startswith("| 1 |"))
    assert "0.60 [0.50, 0.70] (n=20) | 0.40 [0.30, 0.50] (n=20)" in line
    assert len(line.split("|")) == len(header.split("|"))
