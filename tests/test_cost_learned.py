"""Estimates that learn (#28): a first dry run prices completions by a prior and prints a range that covers
the bill; once a run has answered, the next dry run learns the teachers' completion tokens from the cache
and lands within 15% of the next run's bill. Servers answering short tool calls (30-50 tokens)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from replay.run import main
from tests.caching_server import caching_server
from tests.teacher_script import scripted
from tests.test_cost_run import billed

FIRST = "cb2e607c-c758-415a-8b45-c49e4631906a.jsonl"   # answered first: what the cache learns from
NEXT = "258c7280-ae70-4798-800f-63464d01a85d.jsonl"    # then estimated and run


def short(body: dict[str, Any]) -> int:
    return 30 + int(hashlib.sha256(json.dumps(body["messages"][-1:]).encode()).hexdigest(), 16) % 21


def run(source: Path, out: Path, cache: Path, *extra: str) -> list[dict[str, Any]]:
    gpt, gpt_cache = caching_server("openai", scripted, short)
    deepseek, deepseek_cache = caching_server("deepseek", scripted, short)
    with gpt, deepseek:
        teachers = (f"gpt-5=openai/gpt-5@{gpt.url}#price=gpt-5,"
                    f"deepseek=deepseek/deepseek-chat@{deepseek.url}#price=deepseek/deepseek-chat")
        assert main(["--source", str(source), "--out", str(out), "--teachers", teachers,
                     "--cache", str(cache), "--max-states", "30", *extra]) == 0
    return gpt_cache.ledger + deepseek_cache.ledger


def estimate(source: Path, out: Path, cache: Path) -> dict[str, Any]:
    run(source, out, cache, "--dry-run")
    return json.loads((out / "report.json").read_text())["extra"]


def test_first_estimate_covers_the_bill_and_a_learned_one_is_within_15_percent(fixtures_root: Path,
                                                                                tmp_path: Path) -> None:
    first, following = next(fixtures_root.rglob(FIRST)), next(fixtures_root.rglob(NEXT))
    cache = tmp_path / "cache.sqlite"
    prior = estimate(following, tmp_path / "dry1", cache)
    assert all("prior" in source for source in prior["estimate_sources"].values())
    assert "reasoning" in prior["estimate_sources"]["gpt-5"]  # gpt-5 bills its hidden reasoning
    run(first, tmp_path / "first", cache)
    learned = estimate(following, tmp_path / "dry2", cache)
    assert all("answers of" in source for source in learned["estimate_sources"].values())
    bill = sum(billed(row) for row in run(following, tmp_path / "next", cache))
    rows = prior["estimate"].values()
    low, high = sum(r["cost_usd_low"] for r in rows), sum(r["cost_usd_high"] for r in rows)
    assert low <= bill <= high, (low, bill, high)
    point = sum(r["cost_usd"] for r in learned["estimate"].values())
    assert abs(point / bill - 1) <= 0.15, (point, bill)
