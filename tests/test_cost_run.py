"""`replay.run` cost end to end against prefix-caching loopback servers: report.json is what the servers
billed, the --dry-run estimate is close to it, and --max-cost is a hard cap at concurrency 16."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from replay.run import main
from teachers.cost import call_cost
from teachers.registry import parse_pool
from tests.caching_server import caching_server
from tests.llm_server import Reply
from tests.teacher_script import scripted

SESSION = "cb2e607c-c758-415a-8b45-c49e4631906a.jsonl"  # one trace; its first 30 states
PUBLISHED = {"gpt-5": (1.25, 0.125, 10.0), "deepseek-chat": (0.28, 0.028, 0.42)}  # USD/M: in, cached, out


def billed(row: dict[str, Any]) -> float:
    """One call's usage at the published prices, by hand."""
    price_in, price_cached, price_out = PUBLISHED[row["model"]]
    usage = row["usage"]
    details = usage.get("prompt_tokens_details") or {}
    cached = usage.get("prompt_cache_hit_tokens", details.get("cached_tokens"))
    return ((usage["prompt_tokens"] - cached) * price_in + cached * price_cached
            + usage["completion_tokens"] * price_out) / 1e6


def completion_tokens(body: dict[str, Any]) -> int:
    """100 to 700, drawn from the prompt (mean 400: what the estimate assumes)."""
    return 100 + int(hashlib.sha256(json.dumps(body["messages"][-1:]).encode()).hexdigest(), 16) % 601


def run(source: Path, out: Path, *extra: str,
        delay: float = 0.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    def answer(body: dict[str, Any]) -> Reply:
        reply = scripted(body)
        reply.delay = delay
        return reply

    gpt, gpt_cache = caching_server("openai", answer, completion_tokens)
    deepseek, deepseek_cache = caching_server("deepseek", answer, completion_tokens)
    with gpt, deepseek:
        teachers = (f"gpt-5=openai/gpt-5@{gpt.url}#price=gpt-5,"
                    f"deepseek=deepseek/deepseek-chat@{deepseek.url}#price=deepseek/deepseek-chat")
        assert main(["--source", str(source), "--out", str(out), "--teachers", teachers,
                     "--cache", str(out.parent / f"{out.name}.sqlite"), *extra]) == 0
    return json.loads((out / "report.json").read_text()), gpt_cache.ledger + deepseek_cache.ledger


def test_report_is_what_was_billed_and_the_estimate_is_close(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob(SESSION))
    report, ledger = run(session, tmp_path / "run", "--max-states", "30")
    truth = sum(billed(row) for row in ledger)
    assert report["cost_usd"] == pytest.approx(truth, rel=0.05)
    cached = sum(row["usage"].get("prompt_cache_hit_tokens", (row["usage"].get("prompt_tokens_details") or {})
                                  .get("cached_tokens", 0)) for row in ledger)
    assert report["tokens"]["cached_prompt"] == cached > 0.8 * report["tokens"]["prompt"]
    per_teacher = report["extra"]["per_teacher"]
    assert sum(t["cached_prompt_tokens"] for t in per_teacher.values()) == cached
    assert report["extra"]["prompt_cache"]["hit_share"] > 0.8
    dry = tmp_path / "dry"
    assert main(["--source", str(session), "--out", str(dry), "--teachers", "gpt-5,deepseek", "--dry-run",
                 "--max-states", "30", "--cache", str(tmp_path / "dry.sqlite")]) == 0
    estimate = json.loads((dry / "report.json").read_text())["extra"]
    rows = estimate["estimate"]
    # A first dry run knows no answers: completions by a prior (gpt-5 a reasoning model's), a range that
    # covers the bill (#28); the prompt side, which the prompt-cache model prices, is close to it.
    low, high = (sum(r[f"cost_usd_{end}"] for r in rows.values()) for end in ("low", "high"))
    assert low <= truth <= high
    completions = sum(call_cost(parse_pool(name)[0], 0, int(r["completion_tokens"]))
                      for name, r in rows.items())
    billed_completions = sum(billed({**row, "usage": {**row["usage"], "prompt_tokens": 0,
                                                      "prompt_cache_hit_tokens": 0}}) for row in ledger)
    prompt_side = sum(r["cost_usd"] for r in rows.values()) - completions
    assert prompt_side == pytest.approx(truth - billed_completions, rel=0.25)
    assert "prompt cache modelled per trace" in estimate["estimate_model"]


@pytest.mark.parametrize("cap", [0.1])
def test_max_cost_is_a_hard_cap_at_concurrency_16(fixtures_root: Path, tmp_path: Path, cap: float) -> None:
    fixtures = fixtures_root  # every trace: many run at once
    # the states the cap leaves unasked are failed: --max-failed 1 writes the partial dataset (exit 0)
    report, ledger = run(fixtures, tmp_path / "capped", "--max-cost", str(cap), "--concurrency", "16",
                         "--max-failed", "1", delay=0.01)
    spent = sum(billed(row) for row in ledger)
    largest = max(billed(row) for row in ledger)
    assert spent <= cap + largest
    assert spent > 0.8 * cap  # a hard cap, not a timid one
    assert report["teacher_calls"]["budget_exhausted"] > 0 and report["states_budget_stopped"] > 0
    assert report["cost_usd"] == pytest.approx(spent, abs=1e-6)  # report.json rounds to 6 places


def test_unpriced_endpoints_are_named_in_report_and_card(tmp_path: Path, fixtures_root: Path) -> None:
    session = next(fixtures_root.rglob("03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"))
    server, _ = caching_server("openai", scripted)
    with server:
        assert main(["--source", str(session), "--out", str(tmp_path / "out"), "--cache",
                     str(tmp_path / "c.sqlite"), "--teachers", f"gpt-5=openai/gpt-5@{server.url}"]) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["cost_usd"] == 0.0 and report["tokens"]["prompt"] > 0
    assert "custom endpoint without a price" in report["extra"]["unpriced"]["gpt-5"]
    assert "Unpriced (counted as 0): gpt-5." in (tmp_path / "out" / "README.md").read_text()
