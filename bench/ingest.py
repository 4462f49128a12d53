"""Ingestion end to end: `replay.run --dry-run` (states written) against a bare orjson pass.

    python bench/ingest.py [--mb 200] [--long-mb 50] [--repeat 3] [--include-subagents]

Two corpora, built in a temporary folder from the shared fixtures:
- `corpus`: the fixtures replicated to >= --mb MB, each copy its own sessions (sessionId, message
  ids), so neither resumed-session dedup nor state ids merge the copies;
- `long`: one session of >= --long-mb MB, the 04a fixture chained to itself (each copy's root hangs
  off the previous copy's last record), the case where whole-history-per-state storage grows with
  the square of the session's length.

Each measurement runs in its own process (so its peak RSS is its own); medians of --repeat runs. The
run is measured as users run it (secrets redacted, #13), and with --no-redact to tell the costs apart.
Printed: MB/s of sessions for the bare orjson pass and for the run, output bytes / input bytes, and
peak RSS beside the largest session's size (memory must follow the largest session, not the corpus).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    # `python bench/ingest.py`: this folder must not shadow the packages, and this checkout's code is
    # what is measured (not whichever checkout an editable install points at)
    sys.path[0] = str(Path(__file__).resolve().parents[1])

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "claude_code" / "projects"
LONG_SOURCE = "-Users-dain-workspace-coderabbit-review-helper/cb2e607c-c758-415a-8b45-c49e4631906a.jsonl"
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TOOL_ID = re.compile(rb"toolu_[A-Za-z0-9]+")
# The long session's histories outgrow --max-prompt-tokens; with trimming off, what is left is reading,
# history building and storage (the trimming itself is ingestion/budget.py's Budget.fit).
NO_TRIM = ["--max-prompt-tokens", str(10**9)]


def _sessions(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.jsonl") if p.is_file())


def replicate(target: Path, megabytes: int) -> int:
    """The fixtures copied until >= `megabytes` MB; every copy gets its own session and message ids."""
    files = _sessions(FIXTURES)
    total, copy = 0, 0
    while total < megabytes * 1_000_000:
        tag = f"{copy:08x}".encode()
        for path in files:
            data = path.read_bytes()
            for colon in (b":", b": "):   # one fixture was written with spaces after colons
                data = data.replace(b'"id"' + colon + b'"msg_', b'"id"' + colon + b'"msg_c' + tag + b"_")
                data = data.replace(b'"sessionId"' + colon + b'"', b'"sessionId"' + colon + b'"' + tag + b"-")
            dest = target / f"copy{copy}" / path.relative_to(FIXTURES)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            total += len(data)
        copy += 1
    return total


def chain(target: Path, megabytes: int) -> int:
    """One long session: the 04a fixture repeated, each copy's root re-parented onto the last record
    of the copy before, with its own uuids, tool call ids and message ids; one sessionId throughout."""
    source = (FIXTURES / LONG_SOURCE).read_bytes()
    session_id = json.loads(source.splitlines()[0]).get("sessionId") or "long"
    parts, total, copy, last = [], 0, 0, None
    while total < megabytes * 1_000_000:
        tag = f"{copy:08x}".encode()
        data = UUID.sub(lambda m, t=tag: t + m.group(0)[8:], source)
        data = TOOL_ID.sub(lambda m, t=tag: b"toolu_" + t + m.group(0)[6:], data)
        data = data.replace(b'"id":"msg_', b'"id":"msg_c' + tag + b"_")
        data = re.sub(rb'"sessionId":"[^"]*"', b'"sessionId":"' + session_id.encode() + b'"', data)
        if last is not None:
            data = data.replace(b'"parentUuid":null', b'"parentUuid":"' + last + b'"', 1)
        last = [json.loads(line)["uuid"] for line in data.splitlines() if b'"uuid"' in line][-1].encode()
        parts.append(data)
        total += len(data)
        copy += 1
    path = target / "-long" / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(parts))
    return total


def orjson_pass(root: Path) -> dict:
    import orjson

    records = 0
    for path in _sessions(root):
        with open(path, "rb") as handle:
            for line in handle:
                if not line.isspace():
                    orjson.loads(line)
                    records += 1
    return {"records": records}


def run_pass(root: Path, out: Path, flags: list[str]) -> dict:
    from replay.run import main

    argv = ["--source", str(root), "--out", str(out), "--dry-run", *flags]
    if main(argv) != 0:
        raise SystemExit("replay.run failed")
    report = json.loads((out / "report.json").read_text())
    written = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    return {"states": report["states"], "out_bytes": written}


def load_pass(out: Path) -> dict:
    from ingestion.store import load_states

    return {"states": sum(1 for _ in load_states(out))}


def _peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM starts afresh at exec; ru_maxrss would carry the parent's."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(mode: str, root: Path, out: Path, flags: list[str]) -> None:
    if mode == "run":       # imports before the clock: it measures reading, not interpreter start-up
        import replay.pipeline  # noqa: F401
    start = time.perf_counter()
    result = orjson_pass(root) if mode == "orjson" else load_pass(out) if mode == "load" \
        else run_pass(root, out, flags)
    result["seconds"] = time.perf_counter() - start
    result["peak_rss_mb"] = _peak_rss_mb()
    print(json.dumps(result))


def measure(mode: str, root: Path, out: Path, flags: list[str], repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        command = [sys.executable, __file__, "--child", mode, "--root", str(root), "--out", str(out),
                   "--flags", json.dumps(flags)]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    median = {key: statistics.median(r[key] for r in runs) for key in ("seconds", "peak_rss_mb")}
    return {**runs[-1], **median}


def report(name: str, root: Path, size: int, flags: list[str], repeat: int) -> None:
    out = root.parent / f"{name}-out"
    base = measure("orjson", root, out, flags, repeat)
    largest = max(p.stat().st_size for p in _sessions(root))
    mb = size / 1e6
    print(f"\n{name}: {mb:.0f} MB in {len(_sessions(root))} files, largest session {largest / 1e6:.1f} MB, "
          f"{base['records']} records (median of {repeat})")
    print(f"  bare orjson pass        : {base['seconds']:6.2f} s  {mb / base['seconds']:6.1f} MB/s  "
          f"peak RSS {base['peak_rss_mb']:5.0f} MB")
    variants = [("replay.run --dry-run", []), ("  --no-redact", ["--no-redact"])]
    if name == "long":
        variants.append(("  without trimming", NO_TRIM))
    for label, extra in variants:
        ours = measure("run", root, out, flags + extra, repeat)
        back = measure("load", root, out, flags, repeat)
        print(f"  {label:24s}: {ours['seconds']:6.2f} s  {mb / ours['seconds']:6.1f} MB/s  "
              f"peak RSS {ours['peak_rss_mb']:5.0f} MB  ({ours['seconds'] / base['seconds']:.1f}x the orjson "
              f"pass), {ours['states']} states, output {ours['out_bytes'] / 1e6:.1f} MB = "
              f"{ours['out_bytes'] / size:.2f}x the input; read back with load_states in "
              f"{back['seconds']:.2f} s, peak RSS {back['peak_rss_mb']:.0f} MB")
    print("  targets: output <= 1.5x the input, >= 40 MB/s, peak RSS following the largest session")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--long-mb", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--include-subagents", action="store_true")
    parser.add_argument("--child", choices=["orjson", "run", "load"])
    parser.add_argument("--root", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--flags", default="[]", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.root, args.out, json.loads(args.flags))
        return
    flags = ["--include-subagents"] if args.include_subagents else []
    workdir = Path(tempfile.mkdtemp(prefix="replay-bench-"))
    print("(a shared machine: medians, and ratios against the orjson pass over the same bytes)")
    try:
        if args.mb:
            size = replicate(workdir / "corpus", args.mb)
            report("corpus", workdir / "corpus", size, flags, args.repeat)
        if args.long_mb:
            size = chain(workdir / "long", args.long_mb)
            report("long", workdir / "long", size, flags, args.repeat)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
