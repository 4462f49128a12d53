"""Event-loop lag of a real `replay.run`, printed beside its wall time (issue #14: under 100 ms at 16
concurrent calls on the fixtures).

    python bench/loop_lag.py [--baseline /work/main] [--repeat 3] [--concurrency 16] [--latency 0.3]

Runs `python -m replay.run --source <fixtures> --teachers ta,tb` (loopback server in its own
process, `bench/replay_server.py`; a fresh cache each run, so every call goes to the server) with a
watcher task on its event loop that asks to wake every 20 ms and notes how late it woke: `max` is
the worst stall, `p99` the 99th percentile. The watcher is injected around `asyncio.run`, the same
way for any checkout, so `--baseline DIR` (another checkout of this repository, e.g. main) runs side
by side, interleaved, and the medians of `--repeat` runs are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIXTURES = ROOT.parent / "shared" / "fixtures" / "claude_code" / "projects"


def child(checkout: Path, argv: list[str]) -> None:
    """Inside the measured process: replay.run's main with a lag watcher around asyncio.run."""
    import asyncio

    sys.path.insert(0, str(checkout))
    os.chdir(checkout)
    lags: list[float] = []
    loop_wall = [0.0]
    real_run = asyncio.run

    def run(coro, **kwargs):  # type: ignore[no-untyped-def]
        if threading.current_thread() is not threading.main_thread():
            return real_run(coro, **kwargs)  # litellm's own short-lived loops on worker threads

        async def watched():  # type: ignore[no-untyped-def]
            async def watch() -> None:
                while True:
                    asked = time.perf_counter()
                    await asyncio.sleep(0.02)
                    lags.append(time.perf_counter() - asked - 0.02)

            watcher = asyncio.create_task(watch())
            try:
                return await coro
            finally:
                watcher.cancel()

        start = time.perf_counter()
        try:
            return real_run(watched(), **kwargs)
        finally:
            loop_wall[0] += time.perf_counter() - start

    asyncio.run = run
    from replay.run import main

    start = time.perf_counter()
    code = main(argv)
    wall = time.perf_counter() - start
    lags.sort()
    p99 = lags[max(0, int(len(lags) * 0.99) - 1)] if lags else 0.0
    print(json.dumps({"rc": code, "wall_s": wall, "loop_s": loop_wall[0],
                      "max_ms": (lags[-1] if lags else 0.0) * 1000, "p99_ms": p99 * 1000}))


def measure(checkout: Path, url: str, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["--source", str(args.source), "--out", f"{tmp}/out", "--cache", f"{tmp}/cache.sqlite",
                "--teachers", f"ta=openai/ta@{url},tb=openai/tb@{url}",
                "--concurrency", str(args.concurrency)]
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        done = subprocess.run([sys.executable, __file__, "--child", str(checkout), "--", *argv],
                              capture_output=True, text=True, env=env, cwd=checkout)
    if done.returncode:
        raise SystemExit(f"run failed in {checkout}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="another checkout to run side by side")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.3, help="server seconds per answer")
    parser.add_argument("--source", type=Path, default=FIXTURES)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child:
        child(args.child, rest[1:] if rest[:1] == ["--"] else rest)
        return
    from bench.replay_server import start

    server, url = start(args.latency)
    sides = ([("baseline", args.baseline.resolve())] if args.baseline else []) + [("this", ROOT)]
    print(f"{args.source} · 2 teachers · concurrency {args.concurrency} · server latency "
          f"{args.latency * 1000:.0f} ms · {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in sides}
    try:
        for repeat in range(args.repeat):
            for name, checkout in sides:  # interleaved: a load change hits both sides alike
                result = measure(checkout, url, args)
                results[name].append(result)
                print(f"  run {repeat + 1} {name:<8} wall {result['wall_s']:6.1f} s   loop lag max "
                      f"{result['max_ms']:7.1f} ms   p99 {result['p99_ms']:6.1f} ms", flush=True)
    finally:
        server.kill()
        server.wait()
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "max_ms", "p99_ms")}
        print(f"median {name:<8} wall {med['wall_s']:6.1f} s   loop lag max {med['max_ms']:7.1f} ms   "
              f"p99 {med['p99_ms']:6.1f} ms   (load now {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
