"""What a run really costs against what report.json and --dry-run say, and --max-cost as a hard cap.

    python bench/cost.py [--source DIR] [--caps 0.1,0.5,2] [--latency 0.02] [--completion reply]

Two loopback servers with a provider's prompt cache (tests/caching_server.py) stand in for gpt-5 (the
OpenAI usage shape) and deepseek-chat (DeepSeek's shape); the teachers are priced as those models
(`#price=`). The run is the user's command; the truth is the usage the servers returned, priced by
hand at the published prices. Printed:

    billed       USD of the usage the servers returned (published prices, by hand)
    report       report.json cost_usd, and its ratio to billed
    estimate     the user's command's --dry-run estimate (prompt cache modelled per trace), and its ratio
    uncached     the same estimate with every prompt token at full price (what the estimate used to say)
    caps         per --max-cost X at concurrency 16: spent (billed), the largest single call, and whether
                 spent <= X + largest call

The servers' answers are tool calls scripted from the prompt; their completion token counts are drawn
from the prompt's hash, 100 to 700 (mean 400, the estimate's assumption), so the comparison is about
the prompt side, which the prompt cache changes; `--completion reply` reports the reply's own tokens.

`--learn FIRST,NEXT` (two folders under --source) instead measures estimates that learn (#28), against
servers answering short tool calls (30-50 completion tokens): a dry run of NEXT on an empty cache
(prior; its printed range against NEXT's bill), a run of FIRST into the cache, a dry run of NEXT again
(learned from FIRST's answers), then NEXT's run and its bill.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.caching_server import caching_server  # noqa: E402
from tests.llm_server import Reply  # noqa: E402
from tests.teacher_script import scripted  # noqa: E402

# USD per million tokens: input, cached input, output (OpenAI and DeepSeek price pages).
PUBLISHED = {"gpt-5": (1.25, 0.125, 10.0), "deepseek-chat": (0.28, 0.028, 0.42)}


def call_usd(row: dict[str, Any]) -> float:
    price_in, price_cached, price_out = PUBLISHED[row["model"]]
    usage = row["usage"]
    details = usage.get("prompt_tokens_details") or {}
    cached = usage.get("prompt_cache_hit_tokens", details.get("cached_tokens", 0))
    return ((usage["prompt_tokens"] - cached) * price_in + cached * price_cached
            + usage["completion_tokens"] * price_out) / 1e6


def completions(kind: str) -> Any:
    if kind == "short":
        return lambda body: 30 + int(hashlib.sha256(json.dumps(body["messages"][-1:]).encode()).hexdigest(),
                                     16) % 21
    if kind == "reply":
        return lambda body: 40  # a tool call with a short description, as the scripted teachers answer
    def drawn(body: dict[str, Any]) -> int:
        digest = hashlib.sha256(json.dumps(body["messages"][-1:]).encode()).hexdigest()
        return 100 + int(digest, 16) % 601

    return drawn


def run(args: argparse.Namespace, work: Path, name: str, extra: list[str],
        latency: float, source: Path | None = None, cache: str | None = None) -> tuple[dict, list]:
    from replay.run import main

    def answer(body: dict[str, Any]) -> Reply:
        reply = scripted(body)
        reply.delay = latency
        return reply

    gpt, gpt_cache = caching_server("openai", answer, completions(args.completion))
    deepseek, deepseek_cache = caching_server("deepseek", answer, completions(args.completion))
    with gpt, deepseek:
        teachers = (f"gpt-5=openai/gpt-5@{gpt.url}#price=gpt-5,"
                    f"deepseek=deepseek/deepseek-chat@{deepseek.url}#price=deepseek/deepseek-chat")
        out = work / name
        started = time.perf_counter()
        code = main(["--source", str(source or args.source), "--out", str(out), "--teachers", teachers,
                     "--cache", str(work / f"{cache or name}.sqlite"), "--concurrency", "16", *extra])
        assert code == 0, code
        print(f"  [{name}: {time.perf_counter() - started:.0f} s]", file=sys.stderr)
    return json.loads((out / "report.json").read_text()), gpt_cache.ledger + deepseek_cache.ledger


def learn(args: argparse.Namespace, work: Path) -> None:
    """--learn: the prior's range and the learned estimate against the next run's bill."""
    first, following = (next(args.source.rglob(name)) for name in args.learn.split(","))
    args.completion = "short"

    def dry(name: str) -> tuple[float, float, float, dict]:
        report, _ = run(args, work, name, ["--dry-run"], 0.0, following, "learn")
        rows = report["extra"]["estimate"].values()
        return (sum(r["cost_usd"] for r in rows), sum(r["cost_usd_low"] for r in rows),
                sum(r["cost_usd_high"] for r in rows), report["extra"]["estimate_sources"])

    prior = dry("dry-prior")
    run(args, work, "first", [], args.latency, first, "learn")
    learned = dry("dry-learned")
    _, ledger = run(args, work, "next", [], args.latency, following, "learn")
    bill = sum(call_usd(row) for row in ledger)
    print(f"NEXT's bill ${bill:.4f} ({len(ledger)} calls)")
    print(f"first dry run (prior)   ${prior[0]:.4f} ratio {prior[0] / bill:.2f}, range ${prior[1]:.4f}-"
          f"${prior[2]:.4f}, covers the bill: {prior[1] <= bill <= prior[2]}")
    print(f"second dry run (learned) ${learned[0]:.4f} ratio {learned[0] / bill:.3f} "
          f"(within 15%: {abs(learned[0] / bill - 1) <= 0.15}), range ${learned[1]:.4f}-${learned[2]:.4f}")
    for teacher, source in sorted(learned[3].items()):
        print(f"  {teacher}: {source}")


def estimate(source: Path, work: Path) -> dict[str, Any]:
    from replay.run import main

    assert main(["--source", str(source), "--out", str(work / "dry"), "--teachers", "gpt-5,deepseek",
                 "--cache", str(work / "dry.sqlite"), "--dry-run"]) == 0
    return json.loads((work / "dry" / "report.json").read_text())["extra"]["estimate"]


def completion_side(rows: dict[str, Any]) -> float:
    """What the estimate puts on its assumed completion tokens."""
    from teachers.cost import call_cost
    from teachers.registry import parse_pool

    return sum(call_cost(parse_pool(name)[0], 0, int(row["completion_tokens"])) for name, row in rows.items())


def uncached(rows: dict[str, Any]) -> float:
    """The estimate with every prompt token at the full price."""
    from teachers.cost import call_cost
    from teachers.registry import parse_pool

    return sum(call_cost(parse_pool(name)[0], int(row["prompt_tokens"]), int(row["completion_tokens"]))
               for name, row in rows.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    fixtures = ROOT.parent / "shared" / "fixtures" / "claude_code" / "projects"
    parser.add_argument("--source", type=Path, default=fixtures)
    parser.add_argument("--caps", default="0.1,0.5,2")
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--completion", choices=["mean400", "reply", "short"], default="mean400")
    parser.add_argument("--learn", metavar="FIRST,NEXT", help="estimates that learn (see above)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.learn:
            learn(args, work)
            return
        rows = estimate(args.source, work)
        report, ledger = run(args, work, "run", [], args.latency)
        billed = sum(call_usd(row) for row in ledger)
        predicted = sum(row["cost_usd"] for row in rows.values())
        prompt_billed = sum(call_usd({**row, "usage": {**row["usage"], "completion_tokens": 0}})
                            for row in ledger)
        share = report["extra"]["prompt_cache"]["hit_share"]
        print(f"calls {len(ledger)}  prompt-cache hit share {share:.1%}")
        print(f"billed    ${billed:.3f}  (prompt side ${prompt_billed:.3f})")
        print(f"report    ${report['cost_usd']:.3f}  ratio {report['cost_usd'] / billed:.3f}")
        print(f"estimate  ${predicted:.3f}  ratio {predicted / billed:.3f}  "
              f"(" + ", ".join(f"{k} ${v['cost_usd']:.3f}" for k, v in sorted(rows.items())) + ")")
        prompt_side = predicted - completion_side(rows)
        print(f"  prompt side: estimate ${prompt_side:.3f} vs billed ${prompt_billed:.3f}, "
              f"ratio {prompt_side / prompt_billed:.3f}")
        print(f"uncached  ${uncached(rows):.3f}  ratio {uncached(rows) / billed:.3f}")
        for cap in (float(c) for c in args.caps.split(",") if c):
            # A capped run stops on purpose: its budget-stopped states must not fail it (#14).
            flags = ["--max-cost", str(cap), "--max-failed", "1"]
            capped, ledger = run(args, work, f"cap{cap}", flags, args.latency)
            spent = sum(call_usd(row) for row in ledger)
            largest = max((call_usd(row) for row in ledger), default=0.0)
            print(f"cap ${cap:.2f}: spent ${spent:.4f} (report ${capped['cost_usd']:.4f}), "
                  f"calls {len(ledger)}, largest call ${largest:.4f}, "
                  f"within cap + largest: {spent <= cap + largest}, "
                  f"not made {capped['teacher_calls']['budget_exhausted']}")


if __name__ == "__main__":
    main()
