"""Dry-run speed on real Claude Code sessions, beside a baseline checkout (issue #29).

    python -m bench.real_sessions gather --dest ~/cc-corpus [--known] [--repo OWNER/NAME ...]
                                         [--git-dir PATH ...] [--copy DIR ...] [--mirrors DIR]
    python -m bench.real_sessions measure --corpus ~/cc-corpus [--baseline /tmp/base] [--repeat 3]
                                          [--ccl /tmp/ccl-venv/bin/python]

`gather` builds a corpus of real public sessions OUTSIDE the repository (never commit one). People who
commit their own `~/.claude` folder publish their sessions; most later delete them, so every `*.jsonl`
path in a repository's whole history is taken at its newest version (a deleted file at the version
before its deletion). `--known` gathers the repositories this benchmark was measured on (KNOWN: 771 MB
in 2,907 files on 2026-11-25, CLI 1.0.80 to 2.1.111; two thirds from one author). Each `--repo` is
cloned from GitHub (full history) unless `--mirrors` holds it (as OWNER+NAME, a mirror on disk), each
`--git-dir` (a bare clone or a mirror on disk) read in place, each `--copy` folder (your own
`~/.claude/projects`) copied; every file whose first records look like Claude Code's (a `sessionId`
and a `type` of user/assistant/summary/system) lands under DEST/<source>/, keeping its path. Issue #29
asks for at least 200 MB; `gather` prints the total. `python -m bench.continuing_sessions` arranges such
a corpus so that a third of its files continue or copy another file's session (issue #39).

`measure` compiles each checkout's bytecode (as an installed wheel has it), then runs `python -m
replay.run --source CORPUS --out TMP --dry-run` in this checkout (with redaction and the default worker
processes; with `--ingest-workers 1`; with `--no-redact`) and in `--baseline` (e.g. `git worktree add
/tmp/base 6298582`), each `--repeat` times in a fresh process, interleaved with claude-code-log when
`--ccl` names a Python that has it (every other round in reverse order; `python -m venv /tmp/ccl-venv &&
/tmp/ccl-venv/bin/pip install claude-code-log`): its `load_transcript` over the very files a dry run
reads as sessions (subagent transcripts are skipped by both), the peer reader users already run on these
files (one process; its loop only, not its start). Printed per variant: the worker processes it used
(report.json `extra.ingest_workers`), median seconds, MB/s over the sessions' bytes, the ratios to
claude-code-log (and best against best) and to the baseline, peak RSS of the main process and of its
largest worker, and the size of the output folder; whether every variant's states.jsonl and traces.jsonl
are byte-identical; what a dry run costs before it reads (its time on one tiny session:
claude-code-log's figure leaves its own start out); the load before and after. `--profile` adds a
cProfile of one single-process redacting run of this checkout.
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


def _mirror(root: Path | None, repo: str) -> Path | None:
    """`root/<owner>+<name>` (or its `repo/` folder) when it is a git directory holding `repo`."""
    if root is None:
        return None
    for candidate in (root / repo.replace("/", "+") / "repo", root / repo.replace("/", "+")):
        if (candidate / "HEAD").is_file() or (candidate / ".git").exists():
            return candidate
    return None


def gather(args: argparse.Namespace) -> int:
    dest = args.dest.expanduser().resolve()
    if dest == ROOT or ROOT in dest.parents:
        raise SystemExit("--dest must be outside the repository (a corpus is never committed)")
    total = 0
    for repo in [*(KNOWN if args.known else ()), *args.repo]:
        mirror = _mirror(args.mirrors, repo)
        if mirror is not None:   # a copy on disk: no network needed
            total += _from_git_dir(mirror, dest / repo.replace("/", "+"))
            continue
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
    workers: int       # processes that read the source (report.json extra.ingest_workers)


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
    workers = json.loads((out / "o" / "report.json").read_text())["extra"].get("ingest_workers", 1)
    run = Run(seconds, rss * 1024, children * 1024, _size(out / "o"), digest.hexdigest(), workers)
    shutil.rmtree(out, ignore_errors=True)
    return run


def session_files(corpus: Path, subagents: bool = False) -> list[Path]:
    """The files a default dry run reads as sessions, in its order: every session file under `corpus`
    but subagent transcripts (skipped unless --include-subagents: `subagents`). claude-code-log reads
    these."""
    from ingestion.claude_code.agents import is_subagent_file
    from ingestion.sources import find_files

    return [p for p in find_files(corpus) if subagents or not is_subagent_file(p)]


def _ccl(python: str, listing: Path) -> float:
    """claude-code-log's `load_transcript` over the files listed in `listing`, in one fresh process."""
    code = ("import sys, time, pathlib\nfrom claude_code_log.converter import load_transcript\n"
            "files = [pathlib.Path(f) for f in open(sys.argv[1]).read().splitlines()]\n"
            "t = time.perf_counter()\n"
            "for f in files:\n    load_transcript(f, silent=True)\nprint(time.perf_counter() - t)")
    done = subprocess.run([python, "-c", code, str(listing)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"claude-code-log failed: {done.stderr[-1500:]}")
    return float(done.stdout.split()[-1])


MODES = (("redact", []), ("1 process", ["--ingest-workers", "1"]), ("no-redact", ["--no-redact"]))


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


_TINY = [  # one user turn and one assistant turn
    {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s1",
     "message": {"role": "user", "content": "hi"}},
    {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s1",
     "message": {"id": "m1", "role": "assistant", "model": "claude-x",
                 "content": [{"type": "text", "text": "ok"}]}},
]


def _startup(repeat: int = 3) -> float:
    """What a dry run costs before it reads anything: its time on one tiny session (median)."""
    folder = Path(tempfile.mkdtemp(prefix="bench-tiny-"))
    try:
        (folder / "p").mkdir()
        (folder / "p" / "s1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _TINY))
        return statistics.median(_dry_run(ROOT, folder, []).seconds for _ in range(repeat))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _compile(tree: Path) -> None:
    """Bytecode for every module of `tree`, as an installed wheel has: with PYTHONDONTWRITEBYTECODE set
    (as here) a checkout without it compiles every module again in every run, ~0.5 s."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-x", r"/\.|/(docs|tests|bench)/", str(tree)],
                   capture_output=True, check=False)


def _modes(tree: Path) -> list[tuple[str, list[str]]]:
    """MODES, less `1 process` for a tree older than --ingest-workers (it has one process only)."""
    flags = (tree / "replay" / "run.py").read_text()
    return [(m, e) for m, e in MODES if m != "1 process" or "--ingest-workers" in flags]


def measure(args: argparse.Namespace) -> int:
    corpus = args.corpus.expanduser().resolve()
    files = session_files(corpus)
    size = sum(p.stat().st_size for p in files)
    every = sum(p.stat().st_size for p in corpus.rglob("*.jsonl"))
    trees = [("this", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"corpus: {size / 1e6:.1f} MB of sessions in {len(files)} files ({every / 1e6:.1f} MB with "
          f"subagent transcripts, which a dry run skips); {os.cpu_count()} cores; load at start: {_load()}; "
          f"median of {args.repeat}, interleaved")
    for _name, tree in trees:
        _compile(tree)
    rows: dict[tuple[str, str], list[Run]] = {}
    ccl: list[float] = []
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as listing:
        listing.write("".join(f"{p}\n" for p in files))
        listing.flush()
        jobs = [(name, tree, mode, extra) for name, tree in trees for mode, extra in _modes(tree)]
        jobs += [None] if args.ccl else []   # claude-code-log's turn
        for round_ in range(args.repeat):
            # Interleaved, so a busy spell weighs on every variant alike; every other round in reverse
            # order (ABBA), as this machine's speed drifts within a round too.
            for job in jobs if round_ % 2 == 0 else jobs[::-1]:
                if job is None:
                    ccl.append(_ccl(args.ccl, Path(listing.name)))
                    continue
                name, tree, mode, extra = job
                rows.setdefault((name, mode), []).append(_dry_run(tree, corpus, extra))
    seconds = {key: statistics.median(r.seconds for r in runs) for key, runs in rows.items()}
    peer = statistics.median(ccl) if ccl else None
    if peer is not None:
        print(f"  claude-code-log load_transcript  {peer:6.2f} s {size / 1e6 / peer:6.1f} MB/s  "
              f"(one process, its loop only; best {min(ccl):.2f} s)")
    for (name, mode), runs in rows.items():
        taken = seconds[(name, mode)]
        rss, workers, out = max(r.rss for r in runs), max(r.worker_rss for r in runs), runs[0].output
        used = sorted({r.workers for r in runs})
        ratios = f"{peer / taken:5.2f}x claude-code-log" if peer is not None else ""
        # Best against best as well: on a machine whose speed drifts, the fastest run of each is the
        # one least slowed by whatever else ran (timeit's reasoning).
        ratios += f" (best {min(ccl) / min(r.seconds for r in runs):4.2f}x)" if ccl else ""
        if (args.baseline and name == "this" and ("baseline", mode) in seconds):
            ratios += f"  {seconds[('baseline', mode)] / taken:5.2f}x baseline"
        print(f"  {name:8} {mode:9} {'/'.join(map(str, used))} worker{'s' if used != [1] else ' '}  "
              f"{taken:6.2f} s {size / 1e6 / taken:6.1f} MB/s  {ratios}  peak RSS {rss / 1e6:4.0f} MB"
              f"{f' main, {workers / 1e6:.0f} MB largest worker' if workers else ''}  output "
              f"{out / 1e6:6.1f} MB ({out / size:.2f}x)")
    # Workers against one process within a checkout is the acceptance; against the baseline it tells
    # whether the outputs changed at all (a new redaction rule changes the redacted ones, rightly).
    for label, keys in [(f"{name}: redact, workers and 1 process", [(name, "redact"), (name, "1 process")])
                        for name, _ in trees] + [
                       (f"{mode}: this and baseline", [("this", mode), ("baseline", mode)])
                       for mode in ("no-redact", "redact") if args.baseline]:
        same = {r.digest for key in keys for r in rows.get(key, [])}
        print(f"  outputs, {label}: {'byte-identical' if len(same) == 1 else 'DIFFER'}")
    fixed = _startup()
    print(f"  start-up: a dry run of one two-turn session takes {fixed:.2f} s in this checkout (interpreter,"
          f" imports, rules); claude-code-log's figure leaves its own start out")
    share = 1 - seconds[("this", "no-redact")] / seconds[("this", "redact")]
    print(f"  redaction's share of this checkout's default dry run: {share:.0%}")
    print(f"  load at end: {_load()}")
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
    g.add_argument("--mirrors", type=Path, help="a folder of git mirrors named OWNER+NAME[/repo]: "
                                                 "repositories found there are read without a clone")
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
