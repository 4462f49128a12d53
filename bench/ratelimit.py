"""Pacing to a provider's rate limits: the run against a loopback provider that enforces tokens- and
requests-per-window limits with OpenAI's headers and 429s (tests/ratelimit_server.py), at three token
limits, this tree (adaptive pacing) beside a baseline tree (fixed concurrency 16).

    python bench/ratelimit.py [--baseline /tmp/base-rate] [--limits 30000,60000,120000] [--window 10]

The source is built in code: `--sessions` sessions of `--turns` Bash turns (tests/long_session.py), so
prompts grow from ~0.5k to ~8k tokens. Each run is `python -m replay.run` in a child process with that
tree first on the path; the server runs here. Printed per run:

    util     tokens the server admitted / the most it could admit over the run (the full bucket at the
             start plus the limit's refill over the time from first to last request): 1.0 is the limit
    429      requests answered 429, and their share of all requests
    wall     seconds of the child process
    tpm      report.json's achieved tokens per minute (per_teacher.tokens_per_minute; this tree only)
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

from tests.llm_server import Reply  # noqa: E402
from tests.long_session import long_session  # noqa: E402
from tests.ratelimit_server import Limits, counted_tokens, rate_limited_server  # noqa: E402
from tests.sessions import with_session, write_session  # noqa: E402
from tests.teacher_script import scripted  # noqa: E402


def answer(latency: float):
    def respond(body: dict) -> Reply:
        reply = scripted(body)
        reply.delay = latency
        # usage as the provider counted the request, so report.json's tokens/min speaks the server's units
        reply.body = {**reply.body, "usage": {"prompt_tokens": counted_tokens(body), "completion_tokens": 20,
                                              "total_tokens": counted_tokens(body) + 20}}
        return reply

    return respond


def run(tree: Path, source: Path, work: Path, name: str, tpm: int, window: float, latency: float) -> dict:
    limits = Limits(rpm=100_000, tpm=tpm, window=window)
    with rate_limited_server(limits, answer(latency)) as server:
        env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "replay.run", "--source", str(source), "--out",
                               str(work / name), "--cache", str(work / f"{name}.sqlite"), "--teachers",
                               f"t=openai/m@{server.url}", "--concurrency", "16", "--per-teacher", "16",
                               "--max-failed", "1"], cwd=tree, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    admitted = sum(tokens for _, tokens, status in limits.log if status == 200)
    span = limits.log[-1][0] - limits.log[0][0]
    report = json.loads((work / name / "report.json").read_text())
    per = report["extra"]["per_teacher"]["t"]
    return {"util": admitted / (tpm + tpm / window * span), "rejected": limits.rejected,
            "requests": len(limits.log), "wall": wall, "failed": per["failed"],
            "tpm": per.get("tokens_per_minute")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, default=Path("/tmp/base-rate"))
    parser.add_argument("--limits", default="30000,60000,120000")
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--turns", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i in range(args.sessions):
            records = with_session(long_session(args.turns, 1_500, tag=f"s{i}"),
                                   f"0000000{i}-0000-0000-0000-000000000000")
            write_session(work / "src", records, name=f"0000000{i}-0000-0000-0000-000000000000")
        print(f"uptime: {os.popen('uptime').read().strip()}")
        for tpm in (int(x) for x in args.limits.split(",")):
            for label, tree in (("adaptive", ROOT), ("fixed16", args.baseline)):
                r = run(tree, work / "src", work, f"{label}-{tpm}", tpm, args.window, args.latency)
                print(f"limit {tpm:>7,} tokens/{args.window:.0f}s  {label:<8}  util {r['util']:.2f}  "
                      f"429 {r['rejected']:>4} of {r['requests']:>4} ({r['rejected'] / r['requests']:.1%})  "
                      f"wall {r['wall']:5.1f} s  failed {r['failed']}  tpm {r['tpm']}", flush=True)


if __name__ == "__main__":
    main()
