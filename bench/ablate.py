"""Ablation speed: `python -m replay.ablate --all-subsets` over a run of N cached states x 4 (or 6) teachers.

    python bench/ablate.py [--states 1000] [--prompts short|fixtures|both] [--workers N] [--repeat 1]
                           [--teachers 4|6] [--baseline DIR]

`--baseline DIR` runs the same command from another checkout (e.g. `git worktree add /tmp/base 964449d`)
on the same run folder, alternating with this tree, and prints both medians and their ratio: the cost of
what this tree adds (hindsight, reliability, Shapley values over every subset, the frontier).

The run folder is built synthetically (no teacher is called): states are the shared Claude Code
fixtures' real states, cycled to N with fresh state ids (`--prompts fixtures`, real prompt sizes:
~120 KB each), or short made-up ones (`--prompts short`, ~2 KB); a fifth of them get a Qwen student,
so the qwen teacher is excluded there. Four teachers (gpt-5, deepseek, qwen-coder, gemini) answer
each state, agreeing with a per-state "right" action at different rates, with some failures
(`--teachers 6` adds kimi and grok). A tenth of the states are failed student actions whose
recovery (the next state) is the right action, so hindsight agreement has something to measure.
The ablation runs as the user runs it, in a fresh process (imports included); the median of
--repeat counts. Target: < 10 s for 1,000 states and all 15 pools.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
FIXTURES = ROOT.parent / "shared" / "fixtures" / "claude_code" / "projects"

from ingestion.schema import Action, Proposal, ToolCall, TraceState  # noqa: E402

TEACHERS = {"gpt-5": (0.8, 0.012), "deepseek": (0.65, 0.0011), "qwen-coder": (0.55, 0.0009),
            "gemini": (0.7, 0.008), "kimi": (0.6, 0.002), "grok": (0.4, 0.0006)}
# name: (how often it gives the state's right action, USD per call); the first `--teachers` of them
COMMANDS = ["ls -la", "pytest -q", "git status", "git diff --stat", "cat setup.cfg", "grep -rn TODO src"]
FILES = ["src/core.py", "src/cli.py", "tests/test_core.py", "README.md"]


def _action(rng: random.Random, kind: int, seed: int) -> Action:
    if kind == 0:
        call = ToolCall(id=f"call_{rng.randrange(10**6)}", name="Bash",
                        arguments={"command": COMMANDS[seed % len(COMMANDS)], "description": "run it"})
    else:
        call = ToolCall(id=f"call_{rng.randrange(10**6)}", name="Read",
                        arguments={"file_path": FILES[seed % len(FILES)]})
    return Action(tool_calls=[call])


def base_states(kind: str) -> list[TraceState]:
    if kind == "short":
        return [TraceState(state_id=f"bench:short:{i}", trace_id="short", turn=i, source="claude_code",
                           messages=[{"role": "system", "content": "You are a coding agent. " * 20},
                                     {"role": "user", "content": f"Fix issue {i}: " + "details " * 150}],
                           tools=[{"type": "function", "function": {"name": "Bash", "parameters": {}}}],
                           student_action=Action(content="On it."), student_model="claude-sonnet-4-5",
                           metadata={"cwd": "/repo"}) for i in range(50)]
    from ingestion.options import IngestOptions
    from ingestion.sources import iter_states
    from ingestion.stats import IngestStats

    return list(iter_states(FIXTURES, IngestOptions(), IngestStats()))


def build_run(folder: Path, n: int, kind: str, seed: int = 0, teachers: int = 4) -> None:
    """The states, proposals.jsonl and run.json of a finished run, without calling anyone."""
    import orjson

    from ingestion.store import StateWriter
    from replay.options import PoolOptions, RunConfig
    from replay.rundir.files import write_json, write_jsonl

    rng = random.Random(seed)
    base = base_states(kind)
    pool = dict(list(TEACHERS.items())[:teachers])
    rights = [(rng.randrange(2), rng.randrange(100)) for _ in range(n + 1)]
    folder.mkdir(parents=True, exist_ok=True)
    proposals = []
    with StateWriter(folder) as writer:
        for i in range(n):
            metadata = dict(base[i % len(base)].metadata)
            right = rights[i]
            if i % 10 == 3 and i % 40 != 39:  # failed; the student's next turn does the right thing
                metadata["outcome"] = {"kind": "error", "calls": []}
                metadata["recovery"] = f"bench:{i + 1}"
                right = rights[i + 1]
            state = base[i % len(base)].model_copy(update={
                "state_id": f"bench:{i}", "trace_id": f"bench-{i // 40}", "turn": i % 40,
                "metadata": metadata, "student_action": _action(rng, *rights[i]),
                "student_model": "Qwen/Qwen3-Coder-30B-A3B-Instruct" if i % 5 == 0 else "claude-sonnet-4-5"})
            writer.write(state)
            for name, (accuracy, usd) in pool.items():
                if name == "qwen-coder" and i % 5 == 0:
                    continue  # same family as the student: the run never asked it
                roll = rng.random()
                action = None if roll < 0.05 else _action(rng, *right) if roll < accuracy else \
                    _action(rng, rng.randrange(2), rng.randrange(100))
                proposals.append(Proposal(state_id=state.state_id, teacher=name, model=name, action=action,
                                          error=None if action else "invalid_tool_arguments", cached=False,
                                          prompt_tokens=30_000, completion_tokens=200, cost_usd=usd))
    write_jsonl(folder / "proposals.jsonl", (p.model_dump(mode="json") for p in proposals))
    config = RunConfig(source=FIXTURES, out=folder, pool=PoolOptions(teachers=",".join(pool),
                                                                     cache=folder / "cache.sqlite"),
                       command="(bench/ablate.py: synthetic run)")
    write_json(folder / "run.json", orjson.loads(config.model_dump_json()))


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _time(tree: Path, run: Path, out: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its workers): CPU time holds up on a busy machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "replay.ablate", "--run", str(run), "--all-subsets",
                    "--out", str(out)], cwd=tree, env={**env, "PYTHONPATH": str(tree)}, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench(states: int, prompts: str, workers: int | None, repeat: int, teachers: int,
          baseline: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-ablate-") as tmp:
        run = Path(tmp) / "run"
        build_run(run, states, prompts, teachers=teachers)
        env = {**os.environ, **({"REPLAY_ABLATE_WORKERS": str(workers)} if workers else {})}
        times: list[tuple[float, float]] = []
        base_times: list[tuple[float, float]] = []
        for _ in range(repeat):  # alternating, so a busy moment on the machine hits both alike
            times.append(_time(ROOT, run, Path(tmp) / "ablation", env))
            if baseline is not None:
                base_times.append(_time(baseline, run, Path(tmp) / "ablation-base", env))
        out = Path(tmp) / "ablation"
        pools = sum(1 for p in out.iterdir() if (p / "dataset").is_dir())
        pairs = sum(int(line.split(",")[10]) for line in (out / "ablation.csv").read_text().splitlines()[1:])
        wall, cpu = (statistics.median(t[k] for t in times) for k in (0, 1))
        print(f"{prompts:>8} prompts: {states:,} states x {teachers} teachers "
              f"({_size(run) / 1e6:,.0f} MB run) -> {pools} pools, {pairs:,} pairs, "
              f"{_size(out) / 1e6:,.0f} MB written: median {wall:.2f} s wall, {cpu:.2f} s CPU, of {repeat} "
              f"({', '.join(f'{w:.1f}/{c:.1f}' for w, c in times)})")
        if base_times:
            base_wall, base_cpu = (statistics.median(t[k] for t in base_times) for k in (0, 1))
            listed = ", ".join(f"{w:.1f}/{c:.1f}" for w, c in base_times)
            print(f"{'':>8}  baseline {baseline}: median {base_wall:.2f} s wall, {base_cpu:.2f} s CPU "
                  f"({listed}); "
                  f"this tree / baseline: wall {wall / base_wall:.2f}, CPU {cpu / base_cpu:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=1000)
    parser.add_argument("--prompts", choices=["short", "fixtures", "both"], default="both")
    parser.add_argument("--workers", type=int, default=None, help="REPLAY_ABLATE_WORKERS (default: per CPU)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--teachers", type=int, choices=[4, 6], default=4)
    parser.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                        help="another checkout to time side by side (e.g. a worktree of 964449d)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"python -m replay.ablate --all-subsets, {args.teachers} teachers, {os.cpu_count()} CPUs, "
          f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"workers: {args.workers or os.environ.get('REPLAY_ABLATE_WORKERS') or 'default'}")
    for prompts in (["short", "fixtures"] if args.prompts == "both" else [args.prompts]):
        bench(args.states, prompts, args.workers, args.repeat, args.teachers, args.baseline)


if __name__ == "__main__":
    main()
