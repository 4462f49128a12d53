"""Dry-run speed on real Claude Code sessions, beside a baseline checkout (issue #29).

    python -m bench.real_sessions gather --dest ~/cc-corpus [--known] [--repo OWNER/NAME ...]
                                         [--git-dir PATH ...] [--copy DIR ...]
    python -m bench.real_sessions measure --corpus ~/cc-corpus [--baseline /tmp/base] [--repeat 3]
                                          [--ccl /tmp/ccl-venv/bin/python]

`gather` builds a corpus of real public sessions OUTSIDE the repository (never commit one). People who
commit their own `~/.claude` folder publish their sessions; most later delete them, so every `*.jsonl`
path in a repository's whole history is taken at its newest version (a deleted file at the version
before its deletion). `--known` gathers the repositories this benchmark was measured on (KNOWN: 771 MB
in 2,907 files on 2026-11-25, CLI 1.0.80 to 2.1.111; two thirds from one author). Each `--repo` is
cloned from GitHub (full history), each `--git-dir` (a bare clone or a mirror on disk) read in place,
each `--copy` folder (your own `~/.claude/projects`) copied; every file whose first records look like
Claude Code's (a `sessionId` and a `type` of user/assistant/summary/system) lands under
DEST/<source>/, keeping its path. Issue #29 asks for at least 200 MB; `gather` prints the total.

`measure` runs `python -m replay.run --source CORPUS --out TMP --dry-run` in this checkout (with
redaction and the default worker processes; with `--ingest-workers 1`; with `--no-redact`) and in
`--baseline` (e.g. `git worktree add /tmp/base 964449d`), each `--repeat` times in a fresh process,
interleaved: median seconds, MB/s over the corpus' bytes, peak RSS of the main process and of its
largest worker (getrusage), and the size of the output folder, then the ratios. Outputs of this
checkout and the baseline are compared byte for byte (states.jsonl, traces.jsonl). With `--ccl` (a
Python that has claude-code-log installed, e.g. `python -m venv /tmp/ccl-venv && /tmp/ccl-venv/bin/pip
install claude-code-log`), claude-code-log's `load_transcript` over the same files is timed too: the
peer reader users already run on these files (one process). `--profile` adds a cProfile of one
single-process redacting run of this checkout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_KINDS = {"user", "assistant", "summary", "system", "attachment", "file-history-snapshot"}
# Public repositories holding someone's committed ~/.claude with its sessions (found 2026-11-25 by
# searching code for session records; MB after the filter, at the versions `gather` takes).
KNOWN = {
    "aistrad/work": 494.5, "Mkid095/vps-system": 139.6, "SWORDIntel/claude-backups": 48.4,
    "LAF-US/IDAHO-VAULT": 43.5, "adrianstanca1/vps-config": 27.1, "Trollz1004/OMEGA-public": 11.1,
    "4thehalibit/omarchy-backup": 6.6, "InvictusAutomation/oc-admin-home-shared": 0.6,
}


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


def _git(git_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True)


def _history_versions(git_dir: Path) -> dict[str, str]:
    """path -> the blob spec of its newest version on any branch (before its deletion, if deleted)."""
    log = _git(git_dir, "log", "--all", "--format=@%H", "--name-status", "--no-renames", "--",
               "*.jsonl").stdout.decode("utf-8", "replace")
    versions: dict[str, str] = {}
    commit = ""
    for line in log.splitlines():   # newest commit first: the first mention of a path wins
        if line.startswith("@"):
            commit = line[1:]
        elif "\t" in line:
            status, path = line.split("\t", 1)
            if path not in versions:
                versions[path] = f"{commit}^:{path}" if status.startswith("D") else f"{commit}:{path}"
    return versions


def _from_git_dir(git_dir: Path, dest: Path) -> int:
    total = 0
    for path, spec in sorted(_history_versions(git_dir).items()):
        blob = _git(git_dir, "cat-file", "blob", spec)
        if blob.returncode == 0:
            total += _keep(dest, path, blob.stdout)
    return total


def _from_folder(folder: Path, dest: Path) -> int:
    return sum(_keep(dest, str(p.relative_to(folder)), p.read_bytes())
               for p in sorted(folder.rglob("*.jsonl")))


def gather(args: argparse.Namespace) -> int:
    dest = args.dest.expanduser().resolve()
    if dest == ROOT or ROOT in dest.parents:
        raise SystemExit("--dest must be outside the repository (a corpus is never committed)")
    total = 0
    for repo in [*(KNOWN if args.known else ()), *args.repo]:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["git", "clone", "-q", "--bare", f"https://github.com/{repo}", tmp], check=True)
            total += _from_git_dir(Path(tmp), dest / repo.replace("/", "+"))
    for git_dir in args.git_dir:
        total += _from_git_dir(git_dir, dest / git_dir.resolve().parent.name)
    for folder in args.copy:
        total += _from_folder(folder.expanduser(), dest / folder.expanduser().resolve().name)
    print(f"{total / 1e6:.1f} MB of Claude Code sessions under {dest}" +
          ("" if total >= 200e6 else "  (issue #29 asks for at least 200 MB)"))
    return 0


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@dataclass
class Run:
    seconds: float
    rss: int           # peak RSS of the main process, bytes
    worker_rss: int    # peak RSS of its largest worker process (0: none)
    output: int        # bytes under OUT
    digest: str        # of states.jsonl + traces.jsonl


def _dry_run(tree: Path, corpus: Path, extra: list[str]) -> Run:
    """One dry run in a fresh process of `tree`."""
    out = Path(tempfile.mkdtemp(prefix="bench-real-"))
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    code = ("import resource, sys, runpy; sys.argv = ['replay.run'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('replay.run', run_name='__main__')\n"
            "except SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
            # VmHWM is this process's own peak: ru_maxrss keeps the peak of the process that forked
            # it (Linux carries it over exec), here this bench's.
            "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "try:\n    peak = int(next(line.split()[1] for line in open('/proc/self/status')\n"
            "                    if line.startswith('VmHWM')))\n"
            "except OSError:\n    pass\n"
            "print('RSS', peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
            "sys.exit(code)")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, "--source", str(corpus), "--out", str(out / "o"),
                           "--dry-run", *extra], cwd=tree, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"dry run failed in {tree}: {done.stderr[-2000:]}")
    rss, children = next(map(int, line.split()[1:3]) for line in done.stderr.splitlines()
                         if line.startswith("RSS "))
    digest = hashlib.sha256()
    for name in ("states.jsonl", "traces.jsonl"):
        with open(out / "o" / name, "rb") as handle:   # in pieces: this process forks the next run
            for piece in iter(lambda: handle.read(1 << 20), b""):
                digest.update(piece)
    run = Run(seconds, rss * 1024, children * 1024, _size(out / "o"), digest.hexdigest())
    shutil.rmtree(out, ignore_errors=True)
    return run


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


MODES = (("redact", []), ("1 process", ["--ingest-workers", "1"]), ("no-redact", ["--no-redact"]))


def measure(args: argparse.Namespace) -> int:
    corpus = args.corpus.expanduser().resolve()
    files = list(corpus.rglob("*.jsonl"))
    size = sum(p.stat().st_size for p in files)
    trees = [("this", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"corpus: {size / 1e6:.1f} MB in {len(files)} files; {os.cpu_count()} cores; load: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; median of {args.repeat}")
    rows: dict[tuple[str, str], list[Run]] = {}
    for _ in range(args.repeat):  # interleaved, so a busy spell weighs on every variant alike
        for name, tree in trees:
            for mode, extra in MODES:
                if name == "baseline" and mode == "1 process":
                    continue   # the baseline has one process only (and no --ingest-workers)
                rows.setdefault((name, mode), []).append(_dry_run(tree, corpus, extra))
    seconds = {}
    for (name, mode), runs in rows.items():
        seconds[(name, mode)] = statistics.median(r.seconds for r in runs)
        rss, workers, out = max(r.rss for r in runs), max(r.worker_rss for r in runs), runs[0].output
        print(f"  {name:8} {mode:9}  {seconds[(name, mode)]:7.2f} s  "
              f"{size / 1e6 / seconds[(name, mode)]:7.1f} MB/s  peak RSS {rss / 1e6:5.0f} MB"
              f"{f' (+ {workers / 1e6:.0f} MB per worker)' if workers else '':24}  output "
              f"{out / 1e6:7.1f} MB ({out / size:.2f}x input)")
    if args.baseline:
        for mode in ("redact", "no-redact"):
            print(f"  speed-up {mode}: {seconds[('baseline', mode)] / seconds[('this', mode)]:.2f}x")
        print(f"  speed-up redact, one process: "
              f"{seconds[('baseline', 'redact')] / seconds[('this', '1 process')]:.2f}x")
        for mode in ("redact", "no-redact"):
            same = {r.digest for r in rows[("this", mode)] + rows[("baseline", mode)]}
            print(f"  outputs {mode}: {'byte-identical' if len(same) == 1 else 'DIFFER'} to the baseline's")
    print(f"  redaction's share of this checkout's dry run (one process): "
          f"{1 - seconds[('this', 'no-redact')] / seconds[('this', '1 process')]:.0%}")
    if args.ccl:
        ccl = _ccl(args.ccl, corpus, args.repeat)
        print(f"  claude-code-log load_transcript: {ccl:7.2f} s  {size / 1e6 / ccl:7.1f} MB/s (one process); "
              f"this dry run with redaction is {ccl / seconds[('this', 'redact')]:.2f}x its speed "
              f"({ccl / seconds[('this', '1 process')]:.2f}x in one process)")
    if args.profile:
        _profile(corpus)
    return 0


def _profile(corpus: Path) -> None:
    out = Path(tempfile.mkdtemp(prefix="bench-real-prof-"))
    stats = out / "prof"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(stats), "-m", "replay.run", "--source",
                    str(corpus), "--out", str(out / "o"), "--dry-run", "--ingest-workers", "1"],
                   cwd=ROOT, env=env, capture_output=True, check=True)
    import pstats

    pstats.Stats(str(stats)).sort_stats("cumulative").print_stats(r"replay|ingestion|teachers", 25)
    shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("gather", help="build a corpus of real sessions outside the repo")
    g.add_argument("--dest", type=Path, required=True)
    g.add_argument("--known", action="store_true", help="the repositories listed in KNOWN")
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
