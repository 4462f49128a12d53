"""A teacher endpoint that refuses connections, on the fixtures: time to exit, exit code, lines on stderr,
peak RSS of the run (child process), this tree beside a baseline tree (killed at `--limit` seconds).

    python bench/unreachable.py [--baseline /tmp/base-rate] [--limit 120] [--teachers 1]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def run(tree: Path, source: Path, work: Path, teachers: str, limit: float) -> str:
    code = ("import resource, runpy, sys; sys.argv = ['replay.run'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('replay.run', run_name='__main__')\n"
            "finally:\n"
            "    print('RSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    started = time.perf_counter()
    try:
        argv = ["--source", str(source), "--out", str(work / "out"), "--cache", str(work / "c.sqlite"),
                "--teachers", teachers]
        done = subprocess.run([sys.executable, "-c", code, *argv], cwd=tree, env=env, capture_output=True,
                              text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        return f"still running at {limit:.0f} s (killed; peak RSS of children so far {peak / 1024:.0f} MB)"
    wall = time.perf_counter() - started
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("RSS_KB")]
    rss = next((int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("RSS_KB")), 0)
    return (f"exit {done.returncode} in {wall:.1f} s, {len(lines)} line(s) on stderr, "
            f"peak RSS {rss / 1024:.0f} MB\n    {lines[-1][:200] if lines else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "fixtures" / "claude_code")
    parser.add_argument("--baseline", type=Path, default=Path("/tmp/base-rate"))
    parser.add_argument("--limit", type=float, default=120.0)
    parser.add_argument("--teachers", type=int, default=3)
    args = parser.parse_args()
    url = refused_url()
    teachers = ",".join(f"t{i}=openai/m{i}@{url}" for i in range(args.teachers))
    print(f"uptime: {os.popen('uptime').read().strip()}")
    for label, tree in (("this tree", ROOT), ("baseline", args.baseline)):
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{label}: {run(tree, args.source, Path(tmp), teachers, args.limit)}", flush=True)


if __name__ == "__main__":
    main()
