"""Ingestion speed: the shared fixtures replicated to >= 200 MB, against a bare orjson pass.

    python bench/ingest.py [--mb 200] [--include-subagents]

Each side runs in its own process (so peak RSS is its own), the fastest of --repeat runs counts.
Copies get their own message ids, so resumed-session dedup does not skip them.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "claude_code" / "projects"


def replicate(target: Path, megabytes: int) -> int:
    files = sorted(p for p in FIXTURES.rglob("*.jsonl"))
    total, copy = 0, 0
    while total < megabytes * 1_000_000:
        for path in files:
            data = path.read_bytes().replace(b'"id":"msg_', f'"id":"msg_c{copy}_'.encode())
            dest = target / f"copy{copy}" / path.relative_to(FIXTURES)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            total += len(data)
        copy += 1
    return total


def orjson_pass(root: Path) -> dict:
    records = 0
    for path in sorted(root.rglob("*.jsonl")):
        with open(path, "rb") as handle:
            for line in handle:
                if not line.isspace():
                    orjson.loads(line)
                    records += 1
    return {"records": records}


def ingestion_pass(root: Path, include_subagents: bool) -> dict:
    stats = IngestStats()
    states = sum(1 for _ in iter_states(root, IngestOptions(include_subagents=include_subagents), stats))
    return {"states": states, "lines": stats.lines}


def child(mode: str, root: Path, include_subagents: bool) -> None:
    # Imports first: the clock measures reading, not interpreter start-up.
    global orjson, IngestOptions, iter_states, IngestStats
    import orjson

    if mode == "ingest":
        from ingestion.options import IngestOptions
        from ingestion.sources import iter_states
        from ingestion.stats import IngestStats

    start = time.perf_counter()
    result = orjson_pass(root) if mode == "orjson" else ingestion_pass(root, include_subagents)
    result["seconds"] = time.perf_counter() - start
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def measure(mode: str, root: Path, include_subagents: bool, repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        command = [sys.executable, __file__, "--child", mode, "--root", str(root)]
        if include_subagents:
            command.append("--include-subagents")
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    return min(runs, key=lambda r: r["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--include-subagents", action="store_true")
    parser.add_argument("--child", choices=["orjson", "ingest"])
    parser.add_argument("--root", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.root, args.include_subagents)
        return
    workdir = Path(tempfile.mkdtemp(prefix="replay-bench-"))
    try:
        size = replicate(workdir, args.mb)
        base = measure("orjson", workdir, args.include_subagents, args.repeat)
        ours = measure("ingest", workdir, args.include_subagents, args.repeat)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    mb = size / 1e6
    print(f"corpus: {mb:.0f} MB, {base['records']} records")
    print(f"orjson pass : {base['seconds']:.2f} s ({mb / base['seconds']:.0f} MB/s), "
          f"peak RSS {base['peak_rss_mb']:.0f} MB")
    print(f"ingestion   : {ours['seconds']:.2f} s ({mb / ours['seconds']:.0f} MB/s), "
          f"peak RSS {ours['peak_rss_mb']:.0f} MB, {ours['states']} states")
    print(f"ratio ingestion / orjson: {ours['seconds'] / base['seconds']:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
