"""Dry-run speed on real Claude Code sessions, beside a baseline checkout (issue #29).

    python -m bench.real_sessions gather --dest ~/cc-corpus --repo OWNER/NAME ... [--git-dir PATH ...]
                                         [--copy DIR ...]
    python -m bench.real_sessions measure --corpus ~/cc-corpus [--baseline /tmp/base] [--repeat 3]
                                          [--ccl /tmp/ccl-venv/bin/python]

`gather` builds a corpus of real public sessions OUTSIDE the repository (never commit one): each `--repo`
is cloned (`git clone --depth 1 https://github.com/OWNER/NAME`), each `--git-dir` (a bare clone or a
mirror already on disk) is read with `git ls-tree`/`git cat-file` at HEAD, each `--copy` folder (your own
`~/.claude/projects`) is copied; every `*.jsonl` whose first records look like Claude Code's (a
`sessionId` and a `type` of user/assistant/summary/system) lands under DEST/<source>/, keeping its path.
Repositories that publish their agent sessions are found by searching code for `.claude/projects`
session logs (e.g. repos with `claude-dev-log-diary/jsonl/`). Issue #29 asks for at least 200 MB;
`gather` prints the total.

`measure` runs `python -m replay.run --source CORPUS --out TMP --dry-run` with redaction and with
`--no-redact`, in this checkout and in `--baseline` (e.g. `git worktree add /tmp/base 964449d`), each
`--repeat` times in a fresh process: median seconds, MB/s over the corpus' bytes, peak RSS (getrusage of
the child) and the size of the output folder, then the ratios. With `--ccl` (a Python that has
claude-code-log installed, e.g. `python -m venv /tmp/ccl-venv && /tmp/ccl-venv/bin/pip install
claude-code-log`), claude-code-log's `load_transcript` over the same files is timed too: the peer
reader users already run on these files. `--profile` adds a cProfile of one redacting run of this
checkout (top functions by cumulative time) to say where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_KINDS = {"user", "assistant", "summary", "system", "attachment", "file-history-snapshot"}


def looks_like_session(head: bytes) -> bool:
    """Whether the first lines of a file are Claude Code records.

    >>> looks_like_session(b'{"type":"user","sessionId":"s","message":{}}\\n')
    True
    >>> looks_like_session(b'{"prompt": "x"}\\n')
    False
    """
    for line in head.splitlines()[:5]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") in _KINDS and (
                "sessionId" in record or record.get("type") == "summary"):
            return True
    return False


def _keep(dest: Path, name: str, data: bytes) -> int:
    if not looks_like_session(data[:65536]):
        return 0
    target = dest / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return len(data)


def _from_git_dir(git_dir: Path, dest: Path) -> int:
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "HEAD"], check=True,
                             capture_output=True, text=True).stdout
    total = 0
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        if path.endswith(".jsonl") and meta.split()[1] == "blob":
            blob = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "blob", meta.split()[2]],
                                  capture_output=True).stdout
            total += _keep(dest, path, blob)
    return total


def _from_folder(folder: Path, dest: Path) -> int:
    return sum(_keep(dest, str(p.relative_to(folder)), p.read_bytes())
               for p in sorted(folder.rglob("*.jsonl")))


def gather(args: argparse.Namespace) -> int:
    dest = args.dest.expanduser().resolve()
    if dest == ROOT or ROOT in dest.parents:
        raise SystemExit("--dest must be outside the repository (a corpus is never committed)")
    total = 0
    for repo in args.repo:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["git", "clone", "-q", "--depth", "1", f"https://github.com/{repo}", tmp],
                           check=True)
            total += _from_folder(Path(tmp), dest / repo.replace("/", "+"))
    for git_dir in args.git_dir:
        total += _from_git_dir(git_dir, dest / git_dir.resolve().parent.name)
    for folder in args.copy:
        total += _from_folder(folder.expanduser(), dest / folder.expanduser().resolve().name)
    print(f"{total / 1e6:.1f} MB of Claude Code sessions under {dest}" +
          ("" if total >= 200e6 else "  (issue #29 asks for at least 200 MB)"))
    return 0


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _dry_run(tree: Path, corpus: Path, extra: list[str]) -> tuple[float, int, int]:
    """(seconds, peak RSS in bytes, output bytes) of one dry run in a fresh process of `tree`."""
    out = Path(tempfile.mkdtemp(prefix="bench-real-"))
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    code = ("import resource, sys, runpy; sys.argv = ['replay.run'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('replay.run', run_name='__main__')\n"
            "except SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
            "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
            "sys.exit(code)")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, "--source", str(corpus), "--out", str(out / "o"),
                           "--dry-run", *extra], cwd=tree, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"dry run failed in {tree}: {done.stderr[-2000:]}")
    rss = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("RSS "))
    size = _size(out / "o")
    shutil.rmtree(out, ignore_errors=True)
    return seconds, rss * 1024, size


def _ccl(python: str, corpus: Path, repeat: int) -> float:
    code = ("import sys, time, pathlib\nfrom claude_code_log.converter import load_transcript\n"
            "files = sorted(pathlib.Path(sys.argv[1]).rglob('*.jsonl'))\nt = time.perf_counter()\n"
            "for f in files:\n    load_transcript(f, silent=True)\nprint(time.perf_counter() - t)")
    times = []
    for _ in range(repeat):
        done = subprocess.run([python, "-c", code, str(corpus)], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"claude-code-log failed: {done.stderr[-1500:]}")
        times.append(float(done.stdout.split()[-1]))
    return statistics.median(times)


def measure(args: argparse.Namespace) -> int:
    corpus = args.corpus.expanduser().resolve()
    size = sum(p.stat().st_size for p in corpus.rglob("*.jsonl"))
    trees = [("this", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"corpus: {size / 1e6:.1f} MB in {len(list(corpus.rglob('*.jsonl')))} files; load: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; median of {args.repeat}")
    rows: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
    for _ in range(args.repeat):  # interleaved, so a busy spell weighs on every variant alike
        for name, tree in trees:
            for mode, extra in (("redact", []), ("no-redact", ["--no-redact"])):
                rows.setdefault((name, mode), []).append(_dry_run(tree, corpus, extra))
    summary = {}
    for (name, mode), runs in rows.items():
        seconds = statistics.median(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        out = runs[0][2]
        summary[(name, mode)] = seconds
        print(f"  {name:8} {mode:9}  {seconds:7.2f} s  {size / 1e6 / seconds:7.1f} MB/s  peak RSS "
              f"{rss / 1e6:6.0f} MB  output {out / 1e6:7.1f} MB ({out / size:.2f}x input)")
    if args.baseline:
        for mode in ("redact", "no-redact"):
            print(f"  speed-up {mode}: {summary[('baseline', mode)] / summary[('this', mode)]:.2f}x")
    print(f"  redaction's share of this checkout's dry run: "
          f"{1 - summary[('this', 'no-redact')] / summary[('this', 'redact')]:.0%}")
    if args.ccl:
        seconds = _ccl(args.ccl, corpus, args.repeat)
        print(f"  claude-code-log load_transcript: {seconds:7.2f} s  {size / 1e6 / seconds:7.1f} MB/s; "
              f"this dry run with redaction is {seconds / summary[('this', 'redact')]:.2f}x its speed")
    if args.profile:
        _profile(corpus)
    return 0


def _profile(corpus: Path) -> None:
    out = Path(tempfile.mkdtemp(prefix="bench-real-prof-"))
    stats = out / "prof"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(stats), "-m", "replay.run", "--source",
                    str(corpus), "--out", str(out / "o"), "--dry-run"], cwd=ROOT, env=env,
                   capture_output=True, check=True)
    import pstats

    pstats.Stats(str(stats)).sort_stats("cumulative").print_stats(r"replay|ingestion|teachers", 25)
    shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("gather", help="build a corpus of real sessions outside the repo")
    g.add_argument("--dest", type=Path, required=True)
    g.add_argument("--repo", action="append", default=[], help="OWNER/NAME of a public GitHub repo")
    g.add_argument("--git-dir", type=Path, action="append", default=[], help="a bare clone on disk")
    g.add_argument("--copy", type=Path, action="append", default=[], help="a folder of sessions")
    m = sub.add_parser("measure", help="dry-run speed, RSS and output size, beside a baseline")
    m.add_argument("--corpus", type=Path, required=True)
    m.add_argument("--baseline", type=Path, help="a checkout to compare with (git worktree add ...)")
    m.add_argument("--repeat", type=int, default=3)
    m.add_argument("--ccl", help="a Python with claude-code-log installed")
    m.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    return gather(args) if args.command == "gather" else measure(args)


if __name__ == "__main__":
    sys.exit(main())
