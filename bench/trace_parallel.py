"""`--trace-parallel`: one long trace against a prefix-caching provider at a reasoning teacher's latency.

    python bench/trace_parallel.py [--turns 200] [--latency 2] [--ks 1,4,auto]

A `--turns`-turn Claude Code session built in code (tests/long_session.py), one teacher priced as gpt-5
at a loopback server with OpenAI's prompt-cache rules (tests/caching_server.py) answering after
`--latency` seconds. Per K: the run's wall time (child process), the bill (the usage the server returned
at gpt-5's published prices, by hand), their ratios to K = 1, the prompt-cache hit share, and the dry
run's printed figures for K = 1 and this K.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.caching_server import caching_server  # noqa: E402
from tests.long_session import write_long_session  # noqa: E402
from tests.teacher_script import scripted  # noqa: E402
from tests.test_cost_run import billed  # noqa: E402


def child(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "replay.run", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True)


def run(source: Path, work: Path, k: str, latency: float) -> dict:
    def answer(body: dict):
        reply = scripted(body)
        reply.delay = latency
        return reply

    server, cache = caching_server("openai", answer)
    with server:
        teachers = f"gpt-5=openai/gpt-5@{server.url}#price=gpt-5"
        started = time.perf_counter()
        done = child("--source", str(source), "--out", str(work / k), "--cache", str(work / f"{k}.sqlite"),
                     "--teachers", teachers, "--trace-parallel", k)
        wall = time.perf_counter() - started
        assert done.returncode == 0, done.stderr[-2000:]
        dry = child("--source", str(source), "--out", str(work / f"dry{k}"), "--cache",
                    str(work / f"dry{k}.sqlite"), "--teachers", teachers, "--trace-parallel", k, "--dry-run")
        assert dry.returncode == 0, dry.stderr[-2000:]
    report = json.loads((work / k / "report.json").read_text())
    estimate = json.loads((work / f"dry{k}" / "report.json").read_text())["extra"]["trace_parallel"]
    return {"wall": wall, "bill": sum(map(billed, cache.ledger)), "calls": len(cache.ledger),
            "hit": report["extra"]["prompt_cache"]["hit_share"], "estimate": estimate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--ks", default="1,4,auto")
    parser.add_argument("--output-chars", type=int, default=1_200,
                        help="each tool result's length (1,200: 200 turns stay under the 100k-token prompt "
                             "budget, so no state's history is trimmed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = write_long_session(work / "src", args.turns, args.output_chars)
        print(f"uptime: {os.popen('uptime').read().strip()}")
        first = None
        for k in args.ks.split(","):
            r = run(source, work, k, args.latency)
            first = first or r
            e = r["estimate"]
            print(f"K={k:<4}  wall {r['wall']:6.1f} s ({r['wall'] / first['wall']:.2f}x)  "
                  f"bill ${r['bill']:.4f} ({r['bill'] / first['bill']:.2f}x)  calls {r['calls']}  "
                  f"prompt-cache hits {r['hit']:.1%}  "
                  f"dry run: K=1 ${e['k1']['cost_usd']:.4f} {e['k1']['hours']:.3f} h, K={e['k']} "
                  f"${e['chosen']['cost_usd']:.4f} {e['chosen']['hours']:.3f} h, {e['waves']} waves",
                  flush=True)


if __name__ == "__main__":
    main()
