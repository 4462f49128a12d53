"""A corpus of real sessions arranged so that files continue or copy each other's sessions (issue #39).

    python -m bench.continuing_sessions --source ~/cc-corpus --dest ~/cc-continuing [--mb 210]
                                        [--share 0.34] [--seed 39]

Real folders hold sessions that reference each other: resumed sessions copy their history, a session
is split across files, the same session lies on two machines. A corpus gathered from public
repositories (`python -m bench.real_sessions gather`) holds few of them, so this arranges real main
sessions from `--source` (never subagent files: a dry run skips them by default) into `--dest`, outside
the repository. Every arranged file is a base session or made from one, line by line, in one of four
ways, in turn:

- `copied`: `machine-b/<path>` is a copy of the first part of the session (a snapshot another machine
  synced earlier): every turn of it repeats message ids of the base;
- `resumed`: the base keeps its first part and a new session file `<uuid>.jsonl` beside it copies that
  part (records keep their sessionId, as CLI 1.x/2.0 `--resume` writes them) and goes on with the rest
  of the session under its own sessionId;
- `conflicted`: `<id> (conflicted copy).jsonl` beside the base holds its first part (a sync tool's
  copy): it sorts just before the base, so the base's trace goes on from the copy's last state;
- `split`: the base keeps its first part and `<id>-2.jsonl` holds the rest (same sessionId, turns
  numbered from 0 again): the two files share a session id and its state ids.

At least `--share` of the files are such arranged files (a third by default); the corpus holds at least
`--mb` MB. The same source and seed give the same corpus.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import uuid
from pathlib import Path

KINDS = ("copied", "resumed", "conflicted", "split")
MAX_FILE = 12 << 20   # one huge session would make the corpus one session's


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _cut(lines: list[bytes], rng: random.Random) -> int:
    """Where the first part ends: between 50% and 90% of the lines."""
    return max(1, min(len(lines) - 1, int(len(lines) * rng.uniform(0.5, 0.9))))


def _renamed(line: bytes, old: str, new: str) -> bytes:
    """A record whose sessionId is `old` carries `new` (the resumed session's own records)."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict) or record.get("sessionId") != old:
        return line
    record["sessionId"] = new
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _session_id(lines: list[bytes]) -> str | None:
    for line in lines[:50]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("sessionId"), str):
            return record["sessionId"]
    return None


def arrange(kind: str, base: Path, target: Path, dest: Path, rng: random.Random) -> list[Path]:
    """Write the base session and the file(s) made from it; return the files written."""
    lines = _lines(base)
    cut = _cut(lines, rng)
    target.parent.mkdir(parents=True, exist_ok=True)
    stem = target.name[: -len(".jsonl")]
    if kind == "copied":
        target.write_bytes(b"".join(lines))
        copy = dest / "machine-b" / target.relative_to(dest)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(b"".join(lines[:cut]))
        return [target, copy]
    if kind == "conflicted":
        target.write_bytes(b"".join(lines))
        copy = target.with_name(f"{stem} (conflicted copy).jsonl")
        copy.write_bytes(b"".join(lines[:cut]))
        return [target, copy]
    target.write_bytes(b"".join(lines[:cut]))
    if kind == "split":
        rest = target.with_name(f"{stem}-2.jsonl")
        rest.write_bytes(b"".join(lines[cut:]))
        return [target, rest]
    old = _session_id(lines) or stem
    new = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    resumed = target.with_name(f"{new}.jsonl")
    resumed.write_bytes(b"".join(lines[:cut]) + b"".join(_renamed(line, old, new) for line in lines[cut:]))
    return [target, resumed]


def build(source: Path, dest: Path, mb: float, share: float, seed: int) -> tuple[int, int, int]:
    """(files, arranged files, bytes) of the corpus written into `dest`."""
    rng = random.Random(seed)
    bases = sorted(p for p in source.rglob("*.jsonl")
                   if not p.name.startswith("agent-") and 64 << 10 <= p.stat().st_size <= MAX_FILE)
    rng.shuffle(bases)
    if dest.exists():
        shutil.rmtree(dest)
    files = arranged = size = 0
    for n, base in enumerate(bases):
        if size >= mb * 1e6 and arranged >= share * files:
            break
        target = dest / base.relative_to(source)
        if arranged < share * (files + 2) and len(_lines(base)) >= 4:
            written = arrange(KINDS[n % len(KINDS)], base, target, dest, rng)
            arranged += len(written) - 1
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(base, target)
            written = [target]
        files += len(written)
        size += sum(p.stat().st_size for p in written)
    return files, arranged, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="a corpus of real sessions (gather)")
    parser.add_argument("--dest", type=Path, required=True, help="a new folder outside the repository")
    parser.add_argument("--mb", type=float, default=210.0)
    parser.add_argument("--share", type=float, default=0.34, help="share of files made from another's")
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    dest = args.dest.expanduser().resolve()
    if dest == root or root in dest.parents:
        raise SystemExit("--dest must be outside the repository (a corpus is never committed)")
    files, arranged, size = build(args.source.expanduser().resolve(), dest, args.mb, args.share, args.seed)
    print(f"{size / 1e6:.1f} MB in {files} files under {dest}; {arranged} of them ({arranged / files:.0%}) "
          f"continue or copy another file's session")
    return 0 if size >= args.mb * 1e6 else 1


if __name__ == "__main__":
    sys.exit(main())
