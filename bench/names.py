"""Names in prose on real sessions (issue #58): names found, a sample to read, leaks, and the cost.

    python -m bench.names --corpus /root/corpora/b [--repeat 3] [--sample 50] [--seed 58]
                          [--sample-out /tmp/names_sample.md] [--no-teacher] [--work /tmp/names-bench]

`--corpus`: real public sessions gathered OUTSIDE the repository (`python -m bench.real_sessions gather`;
never commit one). `python -m replay.run --source CORPUS --out TMP --dry-run` runs in a fresh process
`--repeat` times with the pass on (the default) and with `--no-names` (both with `--include-subagents`
when given: a corpus' subagent transcripts are read too), interleaved (every other round in
reverse order); printed: median wall and CPU seconds (the run and its workers), the ratio on / off, and
whether the two runs hold the same states (ids, turns, tool names of the student's actions).
Then, over the `--no-names` OUT's states (secrets and #50's kinds already replaced, names kept), the
names the pass finds in prose (`teachers.person_names.find_people` on user and assistant text and the
student's actions, as the run reads them): occurrences and distinct names, and a seeded sample of
`--sample` distinct names, each with ~100 characters either side of it in the ORIGINAL session (the
corpus file's string that holds it, the name marked [[NAME]]), written to `--sample-out` (outside the
repository: it holds the corpus' names, to be read and judged by a person, never committed). For each
sampled name, how often it is still in the pass-on OUT (any file) as a word, beside the `--no-names` OUT.
Unless `--no-teacher`, the sessions holding the sampled names are cut to windows (5 lines before the
first line holding one, 40 after the last) and read in ONE run, as a user's run reads a corpus (the
names found in any window's prose are the run's, replaced in all of them), so the states that carry the
names (and a few others) are put to a loopback teacher (tests/llm_server.py) through
`replay.run --teachers`, with the pass on and, as the control that shows those states hold the names,
with `--no-names`; the sampled names in the request bodies are counted as words.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pseudonymise import _dry_run, _load, _out_bytes, _shape  # noqa: E402
from bench.real_sessions import _compile, session_files  # noqa: E402


def _speed(corpus: Path, work: Path, repeat: int, subagents: bool) -> None:
    extra = ["--include-subagents"] if subagents else []
    variants = {"names on (default)": extra, "--no-names": [*extra, "--no-names"]}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    load = _load()
    _compile(ROOT)
    for round_ in range(repeat):
        for name in (list(variants) if round_ % 2 == 0 else list(variants)[::-1]):
            flags = variants[name]
            times[name].append(_dry_run(ROOT, corpus, work / ("off" if "--no-names" in flags else "on"),
                                        flags))
    files = sorted(corpus.rglob("*.jsonl")) if subagents else session_files(corpus)
    size = sum(p.stat().st_size for p in files) / 1e6
    print(f"dry run {' '.join(extra)} of {corpus} ({size:.0f} MB of sessions in {len(files)} files), "
          f"{repeat} runs each, "
          f"interleaved; {os.cpu_count()} cores, load {load} at start, {_load()} at end")
    wall = {n: statistics.median(t for t, _ in runs) for n, runs in times.items()}
    cpu = {n: statistics.median(c for _, c in runs) for n, runs in times.items()}
    for name, runs in times.items():
        print(f"  {name:<20} median {wall[name]:7.2f} s, CPU {cpu[name]:7.2f} s  "
              f"(runs {', '.join(f'{t:.2f}/{c:.2f}' for t, c in runs)}, wall/CPU)")
    on, off = list(variants)
    print(f"  names on / --no-names: {wall[on] / wall[off]:.3f}x wall, {cpu[on] / cpu[off]:.3f}x CPU")
    report = json.loads((work / "on" / "report.json").read_text())
    print(f"  report.json pseudonymised (names on): {report['pseudonymised']}")
    same = _shape(work / "on") == _shape(work / "off")
    print(f"  states, turns and tool names the same on and off: {same} ({len(_shape(work / 'on'))} states)")


def _found(out: Path) -> tuple[Counter[str], dict[str, tuple[str, str, str, str]]]:
    """Names found in the prose of OUT's states: occurrences by name, and for each its first sighting
    (trace id, the 40 characters before it, the 40 after, the sentence it is in)."""
    from ingestion.store import load_states
    from teachers.person_names import _prose, find_people

    counts: Counter[str] = Counter()
    where: dict[str, tuple[str, str, str, str]] = {}
    seen: set[str] = set()
    for state in load_states(out):
        action = state.student_action
        texts = [t for m in state.messages for t in _prose(m).values()]
        texts = [t for t in [*texts, action.content, action.thinking or ""] if t and t not in seen]
        seen.update(texts)
        for text, spans in zip(texts, find_people(texts), strict=True):
            for a, b in spans:
                name = text[a:b]
                counts[name] += 1
                if name not in where:
                    where[name] = (state.trace_id, text[max(0, a - 40):a], text[b:b + 40],
                                   " ".join(text[max(0, a - 100):b + 100].split()))
    return counts, where


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")


def _words(data: str, name: str) -> int:
    return len(_word(name).findall(data))


def _strings(value: object, path: str = "") -> list[tuple[str, str]]:
    """(path, string) of every string in a JSON value."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{path}[{i}]")]
    return []


def _common(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _original(path: Path, name: str, before: str, after: str) -> dict[str, object] | None:
    """The sighting of `name` in the session file whose surroundings best match the state's: its line,
    the line's timestamp and type, the string's path, and ~100 characters either side, name marked."""
    best: tuple[int, dict[str, object]] | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if name.isascii() and name not in line:   # JSON may write other characters as \uXXXX
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        for where, text in _strings(record):
            for match in _word(name).finditer(text):
                a, b = match.span()
                score = _common(text[:a][::-1], before[::-1]) + _common(text[b:], after)
                if best is None or score > best[0]:
                    context = f"{text[max(0, a - 100):a]}[[{name}]]{text[b:b + 100]}"
                    best = (score, {"line": number, "timestamp": record.get("timestamp"),
                                    "type": record.get("type"), "field": where,
                                    "context": context.replace("\n", " ⏎ ")})
    return best[1] if best else None


def _sample_file(path: Path, sample: list[str], counts: Counter[str], found: dict[str, dict],
                 where: dict[str, tuple[str, str, str, str]], left: dict[str, tuple[int, int]],
                 sent_to: dict[str, dict[str, int]], corpus: Path) -> None:
    lines = [f"# Names in prose: a sample of {len(sample)} names the pass found in {corpus}",
             "", "Each: the name, its occurrences in the prose the pass read, the session file and line, the "
             "record's type and the field holding it, then ~100 characters either side of it in the original "
             "session (line breaks shown as ⏎), the name marked [[...]]; then how often it is a word under "
             "the pass-on OUT and the --no-names OUT (every file), and in the requests a loopback teacher "
             "got for the states around it (its session's window, read with the others in one run). "
             "Not judged here.", ""]
    for i, name in enumerate(sample, 1):
        hit = found.get(name)
        on, off = left[name]
        teacher = "".join(f"; in the loopback teacher's requests, {label}: {hits.get(name, 0)}"
                          for label, hits in sent_to.items())
        if hit is None:
            lines += [f"{i}. **{name}** ×{counts[name]} — not found as a word in the session file; as the "
                      f"state has it (after the run's other replacements): under OUT: names on {on}, "
                      f"--no-names {off}{teacher}", "", f"    {where[name][3]}", ""]
            continue
        lines += [f"{i}. **{name}** ×{counts[name]} — `{hit['file']}` line {hit['line']}, {hit['type']} "
                  f"`{hit['field']}`; as a word under OUT: names on {on}, --no-names {off}{teacher}", "",
                  f"    {hit['context']}", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")


def _cut(found: dict[str, dict], work: Path, corpus: Path) -> Path:
    """One folder of session windows: per session holding a sampled name, its lines from 5 before the
    first line holding one to 40 after the last (the states that carry the names, and few others), under
    the corpus's own project folders. Read in one run, as a user's run reads them all: the names found in
    one window's prose are the run's, replaced in every window (replay/ingest/names_wide.py)."""
    lines_of: dict[str, list[int]] = {}
    for hit in found.values():
        lines_of.setdefault(str(hit["file"]), []).append(int(hit["line"]))
    root = work / "cut"
    for file, numbers in sorted(lines_of.items()):
        lines = (corpus / file).read_bytes().splitlines(keepends=True)
        copy = root / file
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(b"".join(lines[max(0, min(numbers) - 6):max(numbers) + 40]))   # lines count from 1
    return root


def _teacher(source: Path, work: Path, flags: list[str]) -> tuple[str, int]:
    """The request bodies a loopback teacher received for the windows (one run), and their number."""
    from replay.run import main
    from tests.llm_server import LLMServer
    from tests.teacher_script import scripted

    out = work / f"teacher{''.join(flags)}"
    with LLMServer(scripted) as server, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        cache = work / f"c{''.join(flags)}.sqlite"   # a cache per run: every state asked
        cache.unlink(missing_ok=True)
        main(["--source", str(source), "--out", str(out), "--force", "--cache", str(cache),
              "--teachers", f"ta=openai/ta@{server.url}", *flags])
        return json.dumps(server.requests, ensure_ascii=False), len(server.requests)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.names")
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--seed", type=int, default=58)
    parser.add_argument("--sample-out", type=Path, default=None)
    parser.add_argument("--no-teacher", action="store_true")
    parser.add_argument("--include-subagents", action="store_true",
                        help="read subagent transcripts too (the dry run skips them by default)")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args(argv)
    corpus = args.corpus.expanduser().resolve()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-names-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.repeat:
        _speed(corpus, work, args.repeat, args.include_subagents)   # else: the OUTs of an earlier run in WORK
    counts, where = _found(work / "off")
    print(f"names found in prose (states of the --no-names run): {sum(counts.values())} occurrences, "
          f"{len(counts)} distinct")
    sample = random.Random(args.seed).sample(sorted(counts), min(args.sample, len(counts)))
    # a trace's file: `<session>.jsonl`, or `<session>/subagents/agent-<id>.jsonl` for `<session>/agent-<id>`
    files = {(f"{p.parent.parent.name}/{p.stem}" if p.parent.name == "subagents" else p.stem): p
             for p in sorted(corpus.rglob("*.jsonl"))}
    found = {}
    for name in sample:
        trace, before, after, _ = where[name]
        hit = _original(files[trace], name, before, after) if trace in files else None
        if hit is not None:
            found[name] = {**hit, "file": str(files[trace].relative_to(corpus))}
    on = _out_bytes(work / "on").decode("utf-8", "replace")
    off = _out_bytes(work / "off").decode("utf-8", "replace")
    left = {n: (_words(on, n), _words(off, n)) for n in sample}
    kept = [on for on, _ in left.values()], [off for _, off in left.values()]
    print(f"  sample of {len(sample)} (seed {args.seed}); {len(found)} found as a word in the corpus; still "
          f"a word somewhere under OUT: names on {sum(map(bool, kept[0]))} of them ({sum(kept[0])} "
          f"occurrences), --no-names {sum(map(bool, kept[1]))} ({sum(kept[1])})")
    sent_to: dict[str, dict[str, int]] = {}
    if not args.no_teacher:
        windows = _cut(found, work, corpus)
        sessions = sum(1 for _ in windows.rglob("*.jsonl"))
        subagents = ["--include-subagents"] if args.include_subagents else []
        for flags in ([], ["--no-names"]):
            label = "names on" if not flags else "--no-names"
            sent, requests = _teacher(windows, work, flags + subagents)
            hits = sent_to[label] = {n: _words(sent, n) for n in sample if _words(sent, n)}
            print(f"  loopback teacher, {label}: {requests} requests for {sessions} sessions' windows; "
                  f"sampled names in them: {len(hits)} of {len(sample)} ({sum(hits.values())} occurrences)")
    out = args.sample_out or work / "sample.md"
    _sample_file(out, sample, counts, found, where, left, sent_to, corpus)
    print(f"  the sample: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
