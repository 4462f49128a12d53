"""View build speed and page sizes: `python -m replay.view` over a synthetic run of N states.

    python bench/view.py [--states 20000] [--turns 40] [--repeat 3] [--browser]

The run folder is made up (no teacher is called): traces of --turns turns whose context grows by two
messages a turn (a ~300-character user or tool message and an assistant tool call), three teachers
answering every state (a pair, an agreement or no majority, by state), a few failed answers. Measured,
each in a fresh process, medians of --repeat:
- the view build (`python -m replay.view RUN`), against a baseline that does the least a page per state
  needs: read every state through `load_states` and write its JSON to a file of its own (ratio);
- the largest file written and the bytes the list page loads (states.html + its data scripts);
- with --browser, headless Chromium's `--dump-dom` of the list page (all N states indexed, filters drawn)
  against the same for the overview (ratio): what "opens fast" costs over a page with no index; and of
  the state with the longest context (`state.html#N`, drawn by assets/state.js from data/; checked to
  have drawn it, and the page's own time from navigation to drawn beside the browser's whole run);
- the CPU seconds (user + system) of both children beside their wall time: on a shared machine the CPU
  ratio is the steadier figure.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ingestion.schema import Action, Proposal, ToolCall, TraceState  # noqa: E402

TEACHERS = ("gpt-5", "deepseek", "kimi")
COMMANDS = ["ls -la", "pytest -q", "git status", "git diff --stat", "cat setup.cfg"]
BASELINE = """
import sys, orjson
from pathlib import Path
from replay.pipeline import load_states
out = Path(sys.argv[2]); out.mkdir()
for n, state in enumerate(load_states(Path(sys.argv[1]) / "states.jsonl")):
    (out / f"{n}.json").write_bytes(orjson.dumps(state.model_dump(mode="json")))
"""


def bash(command: str, call_id: str) -> Action:
    return Action(tool_calls=[ToolCall(id=call_id, name="Bash", arguments={"command": command})])


def decided(folder: Path, proposals: list[Proposal]) -> list[dict]:
    """verdicts.jsonl as the run writes it: each state decided once by the run's own functions."""
    from ingestion.store import load_states
    from replay.decide.states import settle
    from replay.decide.verdicts import verdict_record
    from replay.view.verdicts import Setup, decide_state
    from teachers.registry import parse_pool

    answers: dict[str, list[Proposal]] = {}
    for proposal in proposals:
        answers.setdefault(proposal.state_id, []).append(proposal)
    setup = Setup(teachers=parse_pool(",".join(TEACHERS)), reports_failed=True)
    out = []
    for state in load_states(folder):
        decision = decide_state(state, answers, setup)
        student = settle(state, decision.proposals, decision.result, row=False).student
        out.append(verdict_record(state, decision.verdict, student, decision.result, decision.proposals,
                                  decision.excluded))
    return out


def build_run(folder: Path, n: int, turns: int, verdicts: bool = True) -> None:
    """The states, proposals.jsonl, verdicts.jsonl (unless `verdicts` is false: a run from before it),
    run.json and report.json of a finished 3-teacher run."""
    from ingestion.store import StateWriter
    from replay.options import PoolOptions, RunConfig
    from replay.rundir.files import write_json, write_jsonl

    folder.mkdir(parents=True, exist_ok=True)
    proposals = []
    with StateWriter(folder) as writer:
        for i in range(n):
            turn = i % turns
            task = f"Fix issue {i // turns}: " + "details " * 40
            messages: list[dict] = [{"role": "system", "content": "You are a coding agent. " * 40},
                                    {"role": "user", "content": task}]
            for t in range(turn):
                messages.append(bash(COMMANDS[t % 5], f"c{t}").to_message())
                messages.append({"role": "tool", "tool_call_id": f"c{t}", "content": f"output {t} " * 30})
            state = TraceState(state_id=f"bench:{i}", trace_id=f"bench-{i // turns}", turn=turn,
                               source="claude_code", messages=messages,
                               student_action=bash(COMMANDS[i % 5], "s"), student_model="claude-sonnet-4-5",
                               metadata={"cwd": "/repo"})
            writer.write(state)
            for k, teacher in enumerate(TEACHERS):
                command = COMMANDS[(i + (k if i % 3 == 2 else 1)) % 5] if i % 4 else COMMANDS[i % 5]
                failed = (i * 7 + k) % 50 == 0
                proposals.append(Proposal(state_id=state.state_id, teacher=teacher, model=teacher,
                                          action=None if failed else bash(command, "t"),
                                          error="rate_limit: 429" if failed else None,
                                          prompt_tokens=3000, completion_tokens=40, cost_usd=0.001))
    write_jsonl(folder / "proposals.jsonl", (p.model_dump(mode="json") for p in proposals))
    if verdicts:
        write_jsonl(folder / "verdicts.jsonl", decided(folder, proposals))
    config = RunConfig(source=Path("bench"), out=folder, pool=PoolOptions(teachers=",".join(TEACHERS)))
    write_json(folder / "run.json", config.model_dump(mode="json"))
    write_json(folder / "report.json", {"states": n, "traces": -(-n // turns)})


CPU: list[float] = []        # CPU seconds (user + system) of each timed child, in order
STDOUT: list[bytes] = [b""]  # what the last timed child printed


def timed(argv: list[str]) -> float:
    """Wall seconds of one child; its CPU seconds go to CPU (steadier than wall on a shared machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    STDOUT[0] = subprocess.run(argv, cwd=ROOT, check=True, capture_output=True).stdout
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


def dump_time(browser: str, url: str, profile: Path) -> float:
    return timed([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  f"--user-data-dir={profile}", "--dump-dom", url])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=int, default=20_000)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="also time headless Chromium (Debian's)")
    parser.add_argument("--no-verdicts", action="store_true",
                        help="a run without verdicts.jsonl (written before it existed): decided again")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-view-") as tmp:
        run = Path(tmp) / "run"
        build_run(run, args.states, args.turns, verdicts=not args.no_verdicts)
        size = sum((run / name).stat().st_size for name in ("states.jsonl", "traces.jsonl"))
        print(f"{args.states:,} states in {-(-args.states // args.turns):,} traces, "
              f"states.jsonl + traces.jsonl {size / 1e6:.0f} MB")
        views, bases, view_cpu, base_cpu = [], [], [], []
        for k in range(args.repeat):
            bases.append(timed([sys.executable, "-c", BASELINE, str(run), str(Path(tmp) / f"base{k}")]))
            base_cpu.append(CPU[-1])
            shutil.rmtree(Path(tmp) / f"base{k}")
            shutil.rmtree(run / "view", ignore_errors=True)   # deleting the last build is not building
            views.append(timed([sys.executable, "-m", "replay.view", str(run)]))
            view_cpu.append(CPU[-1])
        view, base = statistics.median(views), statistics.median(bases)
        print(f"view build: median {view:.1f} s ({args.states / view:,.0f} states/s); baseline (read "
              f"every state, write one JSON file each): {base:.1f} s; ratio {view / base:.2f}")
        cpu, cpu_base = statistics.median(view_cpu), statistics.median(base_cpu)
        print(f"CPU seconds (user + system): view {cpu:.1f}, baseline {cpu_base:.1f}; ratio "
              f"{cpu / cpu_base:.2f}; load average {os.getloadavg()[0]:.1f}")
        files = [p for p in (run / "view").rglob("*") if p.is_file()]
        largest = max(files, key=lambda p: p.stat().st_size)
        listing = [run / "view/states.html", run / "view/data/meta.js",
                   *sorted((run / "view/data").glob("index-*.js"))]
        print(f"largest file {largest.relative_to(run / 'view')} {largest.stat().st_size / 1e6:.2f} MB; "
              f"the list page loads {sum(p.stat().st_size for p in listing) / 1e6:.2f} MB in "
              f"{len(listing)} files; the view holds {len(files):,} files, "
              f"{sum(p.stat().st_size for p in files) / 1e6:.0f} MB")
        shown = sum(p.stat().st_size for p in run.rglob("*") if p.is_file() and "view" not in p.parts)
        print(f"the view is {sum(p.stat().st_size for p in files) / shown:.2f}x the run folder it shows "
              f"({shown / 1e6:.0f} MB)")
        browser = shutil.which("chromium")
        if args.browser and browser:
            profile = Path(tmp) / "profile"
            lists = [dump_time(browser, (run / "view/states.html").as_uri(), profile)
                     for _ in range(args.repeat)]
            overviews = [dump_time(browser, (run / "view/index.html").as_uri(), profile)
                         for _ in range(args.repeat)]
            # the last turn of a trace: the longest context a page of this run shows
            state = f"{(run / 'view' / 'state.html').as_uri()}#{args.turns - 1}"
            pages, drawn_ms = [], []
            for _ in range(args.repeat):
                pages.append(dump_time(browser, state, profile))
                found = re.search(rb'data-drawn-ms="(\d+)"', STDOUT[0])
                drawn_ms.append(int(found.group(1)) if found else -1)
            drawn = STDOUT[0].partition(b'id="context"')[2].count(b'class="msg ')
            if drawn != 2 * (args.turns - 1) + 2:      # timing a page that did not draw would mean nothing
                sys.exit(f"the state page drew {drawn} context messages, not {2 * (args.turns - 1) + 2}")
            print(f"chromium --dump-dom: list page median {statistics.median(lists):.2f} s, overview "
                  f"{statistics.median(overviews):.2f} s; ratio "
                  f"{statistics.median(lists) / statistics.median(overviews):.2f}; a state page with "
                  f"{drawn} context messages (drawn) {statistics.median(pages):.2f} s, of which the page "
                  f"itself (navigation to drawn) {statistics.median(drawn_ms)} ms")


if __name__ == "__main__":
    main()
