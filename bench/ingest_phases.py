"""Where one core's ingestion time goes, on any folder of sessions (issue #39): reading, redaction and
writing of `replay.run --dry-run`'s loop, then the redaction's own parts over the texts it scanned.

    python bench/ingest_phases.py CORPUS [--repeat 3] [--baseline CHECKOUT]

One process, as `--ingest-workers 1` runs it (the cyclic GC off, as `ingestion.sources` has it while a
file is read), states written to a temporary folder by the run's own writer. Phases, the best of
--repeat passes each (the redactor's memos emptied before each pass; with --baseline, one process per
pass, the two trees taking turns):
- `read`: the readers, every state of the corpus (`ingestion.sources.iter_states`);
- `redact`: `teachers.redact_state.StateRedactor` over those states, the key the run uses;
- `write`: `ingestion.shards.MergingWriter` over the redacted states.
Then every distinct text the redactor handed to `teachers.redact.redact_found`, each part alone:
encoding, the Hyperscan prefilter text by text and once over all texts joined, the rules' RE2 regexes on
the candidates the prefilter left, the base64 runs and their decoding, the escape views, and `_find`
whole. The parts overlap (`_find` holds the others); what `_find` leaves of `redact` is the walk over
messages, tool arguments and metadata.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(ROOT)   # this checkout's code, not an install's


def best(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of `repeat` runs of `run` (seconds) and its last result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return min(times), result


def phases(corpus: Path, repeat: int) -> tuple[list[tuple[str, float | None, str]], list[str]]:
    from ingestion.options import IngestOptions
    from ingestion.shards import MergingWriter
    from ingestion.sources import find_files, iter_states
    from ingestion.stats import IngestStats
    from teachers import redact
    from teachers import redact_state as per_state
    from teachers.secret_rules import rule_set

    rule_set()
    files = find_files(corpus, IngestStats())
    size = sum(path.stat().st_size for path in files)
    key = b"k" * 32
    texts: dict[str, None] = {}
    found = redact.redact_found

    def recording(text: str, key: bytes | None = None) -> Any:
        texts[text] = None
        return found(text, key)

    def read() -> list[Any]:
        return list(iter_states(corpus, IngestOptions(), IngestStats(), files=files))

    def redacted(states: list[Any]) -> list[Any]:
        redactor = per_state.StateRedactor(key)
        return [redactor(state) for state in states]

    def write(states: list[Any]) -> None:
        with tempfile.TemporaryDirectory(prefix="ingest-phases-") as folder:
            with MergingWriter(Path(folder)) as out:
                for state in states:
                    out.write(state)

    gc.disable()   # as the run reads: no cyclic GC over the states it holds
    try:
        read_s, states = best(repeat, read)
        # the walk calls it through its module, the state redactor through its own import
        redact.redact_found = per_state.redact_found = recording
        try:
            redacted(states)
        finally:
            redact.redact_found = per_state.redact_found = found

        def fresh() -> list[Any]:
            redact.redact_found.cache_clear()
            redact._decoded_base64.cache_clear()
            return redacted(states)

        redact_s, out = best(repeat, fresh)
        write_s, _ = best(repeat, lambda: write(out))
        characters = sum(map(len, texts))
        rows: list[tuple[str, float | None, str]] = [
            ("read", read_s, f"{size / read_s / 1e6:.1f} MB/s of sessions, {len(states):,} states"),
            ("redact", redact_s, f"{len(texts):,} distinct texts, {characters / 1e6:.1f} M characters"),
            ("write", write_s, "")]
        rows += parts(list(texts), repeat)
    finally:
        gc.enable()
    return rows, [f"{len(files)} files, {size / 1e6:.1f} MB"]


def parts(texts: list[str], repeat: int) -> list[tuple[str, float | None, str]]:
    """The redaction's parts over `texts`; a part an older tree does not have is None."""
    from teachers import redact
    from teachers.secret_rules import rule_set

    rules = rule_set()
    data = [text.encode("utf-8", "surrogatepass") for text in texts]
    joined = b"\n".join(data)
    escaped = [text for text in texts if "\\" in text]
    rows: list[tuple[str, float | None, str]] = []

    def part(name: str, run: Callable[[], Any], note: Callable[[float], str] = lambda _: "") -> Any:
        """Time `run` into a row; its result (None when this tree lacks the part)."""
        try:
            seconds, result = best(repeat, run)
        except (AttributeError, TypeError):       # not in this tree
            rows.append((name, None, "not in this tree"))
            return None
        rows.append((name, seconds, note(seconds)))
        return result

    def regexes() -> int:
        return sum(1 for d, chosen in zip(data, chosen_rules, strict=True) for rule in chosen
                   for _ in rule.regex.finditer(d))

    def base64() -> int:
        redact._decoded_base64.cache_clear()
        return sum(1 for d in data for s, e in redact._base64_runs(d) if redact._decoded_base64(d[s:e]))

    def whole() -> None:
        redact._decoded_base64.cache_clear()
        for text in texts:
            redact._find(text, redact._DEPTH)

    part("  encode", lambda: [text.encode("utf-8", "surrogatepass") for text in texts])
    part("  prefilter, text by text", lambda: [rules.prefilter(d) for d in data])
    part("  prefilter, all joined", lambda: rules.prefilter(joined),
         lambda seconds: f"{len(joined) / seconds / 1e6:.0f} MB/s")
    chosen_rules = part("  rules chosen, text by text", lambda: [rules.scan(d) for d in data]) or []
    part("  rule regexes on candidates", regexes, lambda _: f"{sum(map(len, chosen_rules)):,} runs in "
                                                        f"{sum(1 for c in chosen_rules if c):,} texts")
    part("  base64 runs and decoding", base64)
    part("  escape views", lambda: [redact._unescape(text) for text in escaped],
         lambda _: f"{len(escaped):,} texts with a backslash")
    part("  _find, whole", whole, lambda _: "holds the parts above")
    return rows


def measure(corpus: Path, repeat: int, code: Path) -> dict[str, Any]:
    """The phases with `code`'s packages, in a process of their own."""
    done = subprocess.run([sys.executable, __file__, str(corpus), "--repeat", str(repeat), "--json",
                           "--code", str(code)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"measuring {code} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path, help="a folder of sessions (as --source takes it)")
    parser.add_argument("--repeat", type=int, default=3, help="passes per phase; the best is shown")
    parser.add_argument("--baseline", type=Path, help="another checkout, measured the same way after this")
    parser.add_argument("--code", type=Path, help=argparse.SUPPRESS)    # the checkout a --json run measures
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        parser.error(f"{args.corpus} is not a folder")
    if args.json:
        sys.path.insert(0, str(args.code.resolve()))
        rows, notes = phases(args.corpus, max(args.repeat, 1))
        print(json.dumps({"rows": rows, "notes": notes}))
        return 0
    # One pass of each tree in turn, `--repeat` times, the best kept per row, the order swapped every
    # round (ABBA): this machine's speed drifts over minutes, and all of one tree's passes before the
    # other's measured the drift. Even so, this checkout against itself gave parts from 0.57x to 1.26x
    # with --repeat 2 (2026-11-27): read a part's ratio only from many rounds.
    trees = [ROOT, args.baseline] if args.baseline else [ROOT]
    runs: list[list[dict[str, Any]]] = [[] for _ in trees]
    for round_ in range(max(args.repeat, 1)):
        for which in (range(len(trees)) if round_ % 2 == 0 else reversed(range(len(trees)))):
            runs[which].append(measure(args.corpus, 1, trees[which]))
    here = _best(runs[0])
    there = _best(runs[1]) if args.baseline else None
    print(f"{args.corpus}: {', '.join(here['notes'])}; best of {args.repeat}, interleaved, one process")
    old = {name: seconds for name, seconds, _ in there["rows"]} if there else {}
    head = f"{'':32s} {'this':>9s}" + (f" {'baseline':>9s} {'ratio':>6s}" if there else "")
    print(head)
    for name, seconds, note in here["rows"]:
        line = f"{name:32s} {_s(seconds)}"
        if there:
            before = old.get(name)
            ratio = f"{before / seconds:5.2f}x" if before and seconds else "     -"
            line += f" {_s(before)} {ratio}"
        print(f"{line}  {note}")
    if there:
        print("ratio: the baseline's seconds over this checkout's (above 1: this checkout is faster)")
    return 0


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The rows of several `--json` runs of one tree, each row at its fastest (its note from that run)."""
    rows = []
    for index, (name, _seconds, _note) in enumerate(runs[0]["rows"]):
        timed = [run["rows"][index] for run in runs if run["rows"][index][1] is not None]
        rows.append(min(timed, key=lambda row: row[1]) if timed else (name, None, runs[0]["rows"][index][2]))
    return {"rows": rows, "notes": runs[0]["notes"]}


def _s(seconds: float | None) -> str:
    return f"{seconds:7.3f} s" if seconds is not None else f"{'-':>9s}"


if __name__ == "__main__":
    sys.exit(main())
