"""Pseudonymisation on real sessions (issues #50, #55): personal data left, and the dry run's speed.

    python -m bench.pseudonymise --corpus /tmp/cc-corpus [--baseline /tmp/base] [--repeat 3]
                                 [--ccl /tmp/ccl-venv/bin/python] [--speed-only] [--teacher-states 300]
                                 [--no-names] [--names-repeat 1] [--include-subagents]

`--corpus`: real public sessions gathered OUTSIDE the repository (`python -m bench.real_sessions gather`;
never commit one). Each variant runs `python -m replay.run --source CORPUS --out TMP --dry-run` in a fresh
process, `--repeat` times, interleaved (every other round in reverse order): this checkout as it is
(pseudonymisation and redaction on, the default worker processes), this checkout with `--no-pseudonymise`,
and `--baseline` (a checkout of the commit before, e.g. `git worktree add /tmp/base 7b412fc`); with
`--ccl` (a Python with claude-code-log: `python -m venv /tmp/ccl-venv && /tmp/ccl-venv/bin/pip install
claude-code-log`), also its `load_transcript` over the files the dry run reads as sessions (its loop only,
in one process, as `bench.real_sessions measure --ccl`). Each checkout's bytecode is compiled first (as an
installed wheel has it). `--no-names` adds a variant with #50's pseudonymisation alone (names in prose,
issue #58, run spaCy's NER where the names extra is installed: many times the others' time), and
`--names-repeat N` runs the default variant in the first N rounds only; `--include-subagents` is
passed to every variant (and claude-code-log reads those transcripts too). Printed: median wall seconds and
the CPU seconds of the run and its worker processes (user + system: what the work costs, less swayed than
wall time by what else runs on the machine), the ratios of pseudonymisation on to `--no-pseudonymise`
(issue #55 asks <= 1.10x) and to the baseline, the default dry run beside claude-code-log (its seconds
over the dry run's: above 1.0x the dry run reads faster), the load before and after, and whether this
checkout's states.jsonl and traces.jsonl are byte-identical to the baseline's. Then, unless
`--speed-only`, in each variant's OUT (every file), the user names of home paths (`/Users/NAME`,
`/home/NAME`, `C:\\Users\\NAME`, `-Users-NAME-`), those names as bare words, e-mail addresses, and the
names before a personal address in git's and mail's fields (`Author: NAME <address>`), as occurrences and
distinct values; and whether the states, traces and turns are the same (ids, turns, tool names of the
student's actions). With `--teacher-states N`, the first N states are also put to a loopback teacher
(tests/llm_server.py, scripted answers) with and without pseudonymisation, and the same counts are taken
over the requests it received.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.real_sessions import _ccl, _compile, session_files  # noqa: E402
from teachers.pseudonyms import _DOMAIN, _LOCAL, _keep_email, is_personal_name  # noqa: E402

_FIELD_NAME = re.compile(r"(?:Author|Committer|From|To|Cc|Co-Authored-By|Signed-off-by): "
                         r"(?P<name>[^<>\n\\\"]{1,60}?) <(?P<address>[^<>@\s]+@[^<>\s]+)>")
_PLACEHOLDER_EMAIL = re.compile(r"email-[0-9a-f]{6}@example\.com$")
HOME = re.compile(rb"(?:/Users/|/home/|Users\\\\{1,2}|-Users-|-home-)([A-Za-z0-9_][A-Za-z0-9._-]*)")


def personal(data: bytes, bare: set[str]) -> dict[str, Counter[str]]:
    """Occurrences of home-path user names, of those names as bare words, and of e-mail addresses."""
    homes: Counter[str] = Counter()
    for match in HOME.finditer(data):
        name = match[1].decode(errors="replace")
        if match[0].startswith((b"-Users-", b"-home-")):
            name = name.split("-")[0]
        name = name.rstrip(".")
        if is_personal_name(name):
            homes[name] += 1
    text = data.decode("utf-8", "replace")
    emails: Counter[str] = Counter()
    for match in _DOMAIN.finditer(text):
        local = _LOCAL.search(text, max(0, match.start() - 64), match.start())
        if local is not None and not _keep_email(address := text[local.start():match.end()]):
            emails[address.lower()] += 1
    names: Counter[str] = Counter()       # `Author: NAME <address>`: a personal address, or one replaced
    for match in _FIELD_NAME.finditer(text):
        address, name = match["address"], match["name"]
        if ((_PLACEHOLDER_EMAIL.match(address) or (_DOMAIN.search(address) and not _keep_email(address)))
                and is_personal_name(name) and not name.endswith("[bot]")):
            names[name] += 1
    words: Counter[str] = Counter()
    for name in bare:
        words[name] = len(re.findall(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE))
    return {"home_user_names": homes, "bare_names": +words, "emails": emails, "display_names": names}


def _out_bytes(out: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file())


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)   # the processes this one has waited for
    return usage.ru_utime + usage.ru_stime


def _dry_run(tree: Path, corpus: Path, out: Path, flags: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the run and the worker processes it waited for)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cpu, started = _cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "replay.run", "--source", str(corpus), "--out", str(out),
                    "--dry-run", *flags], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, _cpu() - cpu


def _digest(out: Path) -> str:
    digest = hashlib.sha256()
    for name in ("states.jsonl", "traces.jsonl"):
        digest.update((out / name).read_bytes())
    return digest.hexdigest()


def _shape(out: Path) -> list[tuple[str, int, tuple[str, ...]]]:
    rows = []
    for line in (out / "states.jsonl").read_bytes().splitlines():
        row = json.loads(line)
        calls = tuple(c.get("name", "") for c in (row.get("student_action") or {}).get("tool_calls") or [])
        rows.append((row["state_id"], row["turn"], calls))
    return rows


def _teacher_counts(corpus: Path, states: int, flags: list[str], bare: set[str], work: Path
                    ) -> dict[str, Counter[str]]:
    from replay.run import main
    from tests.llm_server import LLMServer
    from tests.teacher_script import scripted

    out = work / ("teacher" + "".join(flags))
    with LLMServer(scripted) as server, contextlib.redirect_stdout(io.StringIO()):
        main(["--source", str(corpus), "--out", str(out), "--cache", str(work / "c.sqlite"), "--max-states",
              str(states), "--teachers", f"ta=openai/ta@{server.url}", *flags])
        sent = json.dumps(server.requests).encode()
    return {**{f"requests: {k}": v for k, v in personal(sent, bare).items()},
            **{f"OUT: {k}": v for k, v in personal(_out_bytes(out), bare).items()}}


def _index(variants: list[tuple[str, Path, list[str]]], name: str) -> int:
    return [v[0] for v in variants].index(name)


def _line(name: str, counts: Counter[str]) -> str:
    top = ", ".join(f"{k} {n}" for k, n in counts.most_common(4))
    return f"  {name:<18} {sum(counts.values()):>7} occurrences, {len(counts):>3} distinct  {top}"


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _speed(args: argparse.Namespace, variants: list[tuple[str, Path, list[str]]], work: Path) -> None:
    """The variants' dry runs (and claude-code-log's reader), interleaved; their figures printed."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in variants}
    ccl: list[float] = []
    files = session_files(args.corpus, args.include_subagents)
    listing = work / "sessions.txt"
    listing.write_text("".join(f"{p}\n" for p in files))
    load = _load()
    for tree in {tree for _, tree, _ in variants}:
        _compile(tree)
    jobs: list[tuple[str, Path, list[str]] | None] = [*variants, *([None] if args.ccl else [])]
    for round_ in range(args.repeat):
        for job in (jobs if round_ % 2 == 0 else jobs[::-1]):
            if job is None:
                ccl.append(_ccl(args.ccl, listing))
                continue
            name, tree, flags = job
            if name == "this (pseudonymise on)" and round_ >= (args.names_repeat or args.repeat):
                continue
            times[name].append(_dry_run(tree, args.corpus, work / f"out{_index(variants, name)}", flags))
    size = sum(p.stat().st_size for p in files) / 1e6
    print(f"dry run of {args.corpus} ({size:.0f} MB of sessions in {len(files)} files), {args.repeat} runs "
          f"each, interleaved; {os.cpu_count()} cores, load {load} at start, {_load()} at end")
    wall = {name: statistics.median(t for t, _ in runs) for name, runs in times.items()}
    cpu = {name: statistics.median(c for _, c in runs) for name, runs in times.items()}
    for name, _, _ in variants:
        ratio = f"  {wall[name] / wall['baseline']:.3f}x baseline" if args.baseline else ""
        runs = ", ".join(f"{t:.2f}" for t, _ in times[name])
        print(f"  {name:<24} median {wall[name]:7.2f} s, CPU {cpu[name]:7.2f} s  (runs {runs}){ratio}")
    on, off = "this (pseudonymise on)", "this --no-pseudonymise"
    print(f"  pseudonymisation on / --no-pseudonymise: {wall[on] / wall[off]:.3f}x wall, "
          f"{cpu[on] / cpu[off]:.3f}x CPU (issue #55: <= 1.10x)")
    if "this --no-names" in wall:
        print(f"  --no-names / --no-pseudonymise: {wall['this --no-names'] / wall[off]:.3f}x wall, "
              f"{cpu['this --no-names'] / cpu[off]:.3f}x CPU")
    if ccl:
        peer = statistics.median(ccl)
        runs = ", ".join(f"{t:.2f}" for t in ccl)
        print(f"  claude-code-log load_transcript  median {peer:7.2f} s  (runs {runs}; one process, its loop "
              f"only)\n  default dry run (redaction, pseudonymisation, "
              f"default workers) vs claude-code-log: {peer / wall[on]:.2f}x (best against best "
              f"{min(ccl) / min(t for t, _ in times[on]):.2f}x)")
        for name in ("this --no-names", off):
            if name in wall:
                print(f"  {name} vs claude-code-log: {peer / wall[name]:.2f}x")
    if args.baseline:
        ours, theirs = (work / f"out{_index(variants, name)}" for name in (on, "baseline"))
        same = _digest(ours) == _digest(theirs)
        print(f"  states.jsonl and traces.jsonl, this and baseline: {'byte-identical' if same else 'DIFFER'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pseudonymise")
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--baseline", type=Path, help="a checkout of the commit before")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ccl", help="a Python with claude-code-log installed")
    parser.add_argument("--speed-only", action="store_true", help="no counts of personal data")
    parser.add_argument("--teacher-states", type=int, default=0)
    parser.add_argument("--names-repeat", type=int, default=0,
                        help="run the default variant (names in prose on: spaCy's NER, many times the "
                             "others' time) in the first N rounds only")
    parser.add_argument("--no-names", action="store_true",
                        help="also a variant with --no-names (#50's pseudonymisation without #58's names "
                             "in prose, which run spaCy's NER when the names extra is installed)")
    parser.add_argument("--include-subagents", action="store_true",
                        help="every variant (and claude-code-log) reads subagent transcripts too")
    args = parser.parse_args(argv)
    args.corpus = args.corpus.expanduser().resolve()
    every = ["--include-subagents"] if args.include_subagents else []
    variants = [("this (pseudonymise on)", ROOT, every),
                ("this --no-pseudonymise", ROOT, ["--no-pseudonymise", *every])]
    if args.no_names:
        variants.insert(1, ("this --no-names", ROOT, ["--no-names", *every]))
    if args.baseline:
        variants.append(("baseline", args.baseline.resolve(), every))
    work = Path(tempfile.mkdtemp(prefix="bench-pseudo-"))
    _speed(args, variants, work)
    if args.speed_only:
        return 0
    outs = {name: work / f"out{_index(variants, name)}" for name, _, _ in variants}
    raw = personal(_out_bytes(outs["this --no-pseudonymise"]), set())
    bare = {n for n in raw["home_user_names"] if len(n) >= 3}
    print("\npersonal data in every file under OUT (dry run):")
    for name, out in outs.items():
        print(f" {name}")
        for kind, counts in personal(_out_bytes(out), bare).items():
            print(_line(kind, counts))
    shapes = {name: _shape(out) for name, out in outs.items()}
    first = shapes["this (pseudonymise on)"]
    print("\nstates (ids, turns, tool names) the same as with pseudonymisation on: " + ", ".join(
        f"{name}: {shape == first} ({len(shape)} states)" for name, shape in shapes.items()))
    if args.teacher_states:
        print(f"\nthe first {args.teacher_states} states put to a loopback teacher:")
        for flags in ([], ["--no-pseudonymise"]):
            print(f" {'pseudonymise on' if not flags else '--no-pseudonymise'}")
            for kind, counts in _teacher_counts(args.corpus, args.teacher_states, flags, bare, work).items():
                print(_line(kind, counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
