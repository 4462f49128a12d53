"""Paying twice, measured from the server's side (issue #14): kill -9 then resume, and two runs at once.

    python bench/kill_resume.py [--baseline /work/main] [--points 0.3,0.5,0.7] [--latency 0.3]

For each checkout (this one, and `--baseline DIR` side by side), on the fixtures with teachers ta, tb
(`bench/replay_server.py` logs when each answer was written):

    clean     one uninterrupted run: its requests and pairs.jsonl are the reference
    kill P    a run on a fresh cache, `kill -9` once the server has answered P of the clean run's
              requests, then the same command again to the end. `repeated` = requests of the resumed
              run the killed one had already been answered; `old` = those answered >= 1 s before the
              kill (the issue: must be 0), `oldest` = how long before the kill the oldest of them was
              answered; `same` = the resumed pairs.jsonl equals the clean one
    two runs  two runs started together on one fresh cache: requests in all, against one run's
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIXTURES = ROOT.parent / "shared" / "fixtures" / "claude_code" / "projects"

from bench.replay_server import read_log, start  # noqa: E402


class Side:
    """One checkout's runs against one server, in a scratch folder."""

    def __init__(self, checkout: Path, url: str, log: Path, tmp: Path, args: argparse.Namespace) -> None:
        self.checkout, self.url, self.log, self.tmp, self.args = checkout, url, log, tmp, args
        self.env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def spawn(self, out: str, cache: str) -> subprocess.Popen[bytes]:
        argv = ["--source", str(self.args.source), "--out", str(self.tmp / out),
                "--cache", str(self.tmp / cache),
                "--teachers", f"ta=openai/ta@{self.url},tb=openai/tb@{self.url}",
                "--concurrency", str(self.args.concurrency)]
        return subprocess.Popen([sys.executable, "-m", "replay.run", *argv], cwd=self.checkout, env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def finish(self, child: subprocess.Popen[bytes]) -> str | None:
        """None when the run ended well, else its exit code and last line of stderr."""
        _, err = child.communicate()
        if not child.returncode:
            return None
        lines = err.decode(errors="replace").strip().splitlines() or [""]
        return f"exit {child.returncode}: {lines[-1][:200]}"

    def answered(self) -> list[tuple[float, float, str]]:
        return read_log(self.log)

    def clean(self) -> tuple[int, bytes]:
        self.log.write_text("")
        if failure := self.finish(self.spawn("clean", "clean.sqlite")):
            raise SystemExit(f"the clean run failed in {self.checkout}: {failure}")
        return len(self.answered()), (self.tmp / "clean" / "pairs.jsonl").read_bytes()

    def kill_resume(self, point: float, total: int, pairs: bytes) -> dict[str, object]:
        name = f"kill{int(point * 100)}"
        self.log.write_text("")
        victim = self.spawn(name, f"{name}.sqlite")
        while len(self.answered()) < point * total and victim.poll() is None:
            time.sleep(0.01)
        killed_at = time.time()
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        before = self.answered()
        self.log.write_text("")
        if failure := self.finish(self.spawn(name, f"{name}.sqlite")):
            raise SystemExit(f"the resumed run failed in {self.checkout}: {failure}")
        again = {key for _, _, key in self.answered()}
        repeated = [(at, key) for at, _, key in before if key in again]
        return {"answered": len(before), "repeated": len(repeated),
                "old": sum(at <= killed_at - 1.0 for at, _ in repeated),
                "oldest_ms": max((killed_at - at for at, _ in repeated), default=0.0) * 1000,
                "same": (self.tmp / name / "pairs.jsonl").read_bytes() == pairs}

    def two_runs(self) -> tuple[int, list[str]]:
        self.log.write_text("")
        runs = [self.spawn(out, "shared.sqlite") for out in ("a", "b")]
        failures = [failure for run in runs if (failure := self.finish(run))]
        return len(self.answered()), failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="another checkout to run side by side")
    parser.add_argument("--points", default="0.3,0.5,0.7", help="kill after this share of the answers")
    parser.add_argument("--latency", type=float, default=0.3, help="server seconds per answer")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--source", type=Path, default=FIXTURES)
    args = parser.parse_args()
    sides = ([("baseline", args.baseline.resolve())] if args.baseline else []) + [("this", ROOT)]
    print(f"{args.source} · teachers ta, tb · concurrency {args.concurrency} · server latency "
          f"{args.latency * 1000:.0f} ms · {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        for name, checkout in sides:
            tmp = Path(scratch) / name
            tmp.mkdir()
            log = tmp / "server.log"
            server, url = start(args.latency, log)
            try:
                side = Side(checkout, url, log, tmp, args)
                total, pairs = side.clean()
                print(f"{name}: clean run {total} requests", flush=True)
                for point in (float(p) for p in args.points.split(",")):
                    r = side.kill_resume(point, total, pairs)
                    print(f"{name}: kill -9 at {point:.0%}: {r['answered']} answered before the kill, "
                          f"{r['repeated']} asked again, {r['old']} of them answered >= 1 s before the "
                          f"kill (oldest {r['oldest_ms']:.0f} ms); dataset same as clean: {r['same']}",
                          flush=True)
                both, failures = side.two_runs()
                print(f"{name}: two runs on one cache: {both} requests in all (one run: {total})"
                      + (f"; failed: {'; '.join(failures)}" if failures else ""), flush=True)
            finally:
                server.kill()
                server.wait()


if __name__ == "__main__":
    main()
