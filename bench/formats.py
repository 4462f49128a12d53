"""Ingestion speed per format: MB/s of Codex CLI and Gemini CLI logs beside the Claude Code reader's.

    python bench/formats.py [--mb 20] [--long-mb 20] [--repeat 3]

Per format, two corpora built in a temporary folder:
- `files`: the format's fixtures (Claude Code: ../shared/fixtures; Codex, Gemini: tests/data/agents)
  replicated to >= --mb MB, each copy with its own session, message and call ids (no dedup merges them);
- `long`: one session of >= --long-mb MB, the format's longest fixture's turns repeated with fresh ids
  (Claude Code: the 04a fixture chained to itself, as bench/ingest.py builds it).

Measured in this process: every state of the corpus through `ingestion.sources.iter_states` (sniffing,
reading, history, budgets; no redaction, no storage), and a bare `orjson` pass over the same lines.
Medians of --repeat runs; MB/s of input bytes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])   # measure this checkout's code

import orjson  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "tests" / "data" / "agents"
ID_KEYS = {"id", "call_id", "sessionId", "session_id"}


def fresh_ids(value: Any, tag: str) -> Any:
    """A record with every id (`id`, `call_id`, `sessionId`) made unique to one copy."""
    if isinstance(value, dict):
        return {k: f"{v}~{tag}" if k in ID_KEYS and isinstance(v, str) else fresh_ids(v, tag)
                for k, v in value.items()}
    if isinstance(value, list):
        return [fresh_ids(v, tag) for v in value]
    return value


def copy_file(source: Path, target: Path, tag: str) -> int:
    data = source.read_bytes()
    if source.name.endswith(".json"):
        out = orjson.dumps(fresh_ids(orjson.loads(data), tag))
    else:
        out = b"".join(orjson.dumps(fresh_ids(orjson.loads(line), tag)) + b"\n"
                       for line in data.split(b"\n") if line.strip())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(out)
    return len(out)


def replicate(files: list[Path], target: Path, megabytes: float) -> int:
    total, copy = 0, 0
    while total < megabytes * 1_000_000:
        for path in files:
            total += copy_file(path, target / f"c{copy:05d}" / path.name, f"{copy}")
        copy += 1
    return total


def long_codex(target: Path, megabytes: float) -> int:
    """One rollout: a header, then the escalation fixture's turns repeated with fresh call ids."""
    lines = (AGENTS / "codex" / "kvsankar" / "codex_with_escalation.jsonl").read_bytes().split(b"\n")
    records = [orjson.loads(line) for line in lines if line.strip()]
    head, body = records[:2], [r for r in records[2:] if r["type"] != "event_msg"]
    out = [orjson.dumps(r) + b"\n" for r in head]
    total, copy = sum(map(len, out)), 0
    while total < megabytes * 1_000_000:
        for record in body:
            payload = record["payload"]
            if "call_id" in payload:
                payload = {**payload, "call_id": f"{payload['call_id']}~{copy}"}
            if payload.get("type") == "function_call_output":
                payload = {**payload, "output": "x" * 2000 + f"\nExit code: {copy % 2}"}
            line = orjson.dumps({**record, "payload": payload}) + b"\n"
            out.append(line)
            total += len(line)
        copy += 1
    target.mkdir(parents=True, exist_ok=True)
    (target / "rollout-long.jsonl").write_bytes(b"".join(out))
    return total


def long_gemini(target: Path, megabytes: float) -> int:
    """One session-*.jsonl: the tool-error fixture's messages repeated with fresh ids."""
    lines = (AGENTS / "gemini" / "kvsankar" / "gemini_with_tool_error.jsonl").read_bytes().split(b"\n")
    records = [orjson.loads(line) for line in lines if line.strip()]
    out = [orjson.dumps(records[0]) + b"\n"]
    total, copy = len(out[0]), 0
    while total < megabytes * 1_000_000:
        for record in records[1:]:
            record = fresh_ids(record, str(copy))
            record["sessionId"] = records[0]["sessionId"]
            for call in record.get("toolCalls") or ():
                call["result"][0]["functionResponse"]["response"] = {"output": "y" * 2000}
            line = orjson.dumps(record) + b"\n"
            out.append(line)
            total += len(line)
        copy += 1
    target.mkdir(parents=True, exist_ok=True)
    (target / "session-long.jsonl").write_bytes(b"".join(out))
    return total


def time_states(folder: Path) -> tuple[float, int]:
    from ingestion.options import IngestOptions
    from ingestion.sources import iter_states
    from ingestion.stats import IngestStats

    start = time.perf_counter()
    states = sum(1 for _ in iter_states(folder, IngestOptions(), IngestStats()))
    return time.perf_counter() - start, states


def time_orjson(folder: Path) -> float:
    start = time.perf_counter()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name.endswith(".json"):
            orjson.loads(data)
        else:
            for line in data.split(b"\n"):
                if line.strip():
                    orjson.loads(line)
    return time.perf_counter() - start


def corpora(work: Path, mb: float, long_mb: float, only: str | None) -> dict[str, tuple[Path, int]]:
    sys.path.insert(1, str(ROOT / "bench"))
    import ingest as claude  # bench/ingest.py: the Claude Code corpora, built the same way there

    made: dict[str, tuple[Path, int]] = {}
    made["claude_code files"] = (work / "cc", claude.replicate(work / "cc", int(mb)))
    made["claude_code long"] = (work / "ccl", claude.chain(work / "ccl", int(long_mb)))
    if only == "claude_code":
        return made
    codex = sorted(p for p in (AGENTS / "codex").rglob("*.jsonl"))
    made["codex files"] = (work / "cx", replicate(codex, work / "cx", mb))
    made["codex long"] = (work / "cxl", long_codex(work / "cxl", long_mb))
    gemini = sorted(p for p in (AGENTS / "gemini").rglob("*") if p.is_file())
    made["gemini files"] = (work / "gm", replicate(gemini, work / "gm", mb))
    made["gemini long"] = (work / "gml", long_gemini(work / "gml", long_mb))
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--long-mb", type=float, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=["claude_code"], help="only the Claude Code corpora")
    parser.add_argument("--code", type=Path, help="measure this checkout's ingestion instead")
    args = parser.parse_args()
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))
    with tempfile.TemporaryDirectory() as tmp:
        made = corpora(Path(tmp), args.mb, args.long_mb, args.only)
        time_states(next(iter(made.values()))[0])   # imports and caches warm before any measurement
        print(f"{'corpus':<20} {'MB':>7} {'states':>8} {'states MB/s':>12} {'states/s':>9} "
              f"{'orjson MB/s':>12} {'ratio':>6}")
        for name, (folder, size) in made.items():
            runs = [time_states(folder) for _ in range(args.repeat)]
            seconds, states = statistics.median(r[0] for r in runs), runs[0][1]
            bare = statistics.median(time_orjson(folder) for _ in range(args.repeat))
            mb = size / 1e6
            print(f"{name:<20} {mb:>7.1f} {states:>8} {mb / seconds:>12.1f} {states / seconds:>9.0f} "
                  f"{mb / bare:>12.1f} {bare / seconds:>6.2f}")


if __name__ == "__main__":
    main()
