"""Consensus throughput on synthetic proposals: `python -m bench.consensus [--states N] [--teachers K]`.

Each state gets K teacher proposals: most are the state's "right" action written one of several
equivalent ways (extra spaces, Bash descriptions, absolute vs relative paths, cased text), some a
different action, some failures. Prints states per second for canonicalisation, vote and similarity.
With `--spelled` the right action is also written with other tools and commands of the same intent
(`cat f` / `head -n 80 f` / Read f, `grep -rn x` / `rg x` / Grep x, ...), as real teachers write it,
so that the intent tier has work to do. The script runs against older trees too (no tiers there):
run it from two checkouts side by side to compare.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

# Run as `python bench/consensus.py`, this file's folder comes first on sys.path and its name
# shadows the `consensus` package; drop that entry (`python -m bench.consensus` needs no help).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from consensus.canonical import canonical  # noqa: E402
from consensus.similarity import similarity  # noqa: E402
from consensus.vote import vote  # noqa: E402
from ingestion.schema import Action, Proposal, ToolCall  # noqa: E402

CWD = "/work/repo"
COMMANDS = ["ls -la", "pytest -q tests/test_core.py", "git status", "grep -rn 'def parse' src",
            "python -m pip install -e .", "cat setup.cfg", "git diff --stat"]
FILES = ["src/core.py", "src/parse.py", "tests/test_core.py", "README.md", "setup.cfg"]
TEXTS = ["All tests pass now.", "The fix is in src/core.py.", "I need more information about the bug."]


def _call(name: str, **arguments) -> Action:
    return Action(tool_calls=[ToolCall(id=f"call_{random.randrange(10**6)}", name=name, arguments=arguments)])


def _bash(rng: random.Random, command: str) -> Action:
    spaced = command.replace(" ", rng.choice([" ", "  ", " \t"]))
    extra = rng.choice([{}, {"description": "Run it"}, {"timeout": 120000}])
    return _call("Bash", command=rng.choice(["", "cd /work/repo && "]) + spaced, **extra)


def _path(rng: random.Random, path: str) -> str:
    return rng.choice([path, f"./{path}", f"{CWD}/{path}"])


SPELLINGS = {  # per command of COMMANDS: other ways to do the same thing
    "ls -la": ["ls -F", "ls", "tree -L 2", "find . -maxdepth 1"],
    "pytest -q tests/test_core.py": ["python -m pytest tests/test_core.py",
                                     "pytest tests/test_core.py -x 2>&1 | tail"],
    "git status": ["git status --short", "git status -s"],
    "grep -rn 'def parse' src": ["rg 'def parse'", "git grep -n parse", "grep -rn parse . | head -20"],
    "cat setup.cfg": ["head -n 80 setup.cfg", "sed -n 1,200p setup.cfg", "nl -ba setup.cfg"],
    "git diff --stat": ["git diff", "git --no-pager diff"],
}


def _spelled(rng: random.Random, kind: str, seed: int) -> Action:
    """The action `(kind, seed)` in another spelling of the same intent, when it has one."""
    if kind == "bash":
        command = COMMANDS[seed % len(COMMANDS)]
        if command in SPELLINGS:
            return _bash(rng, rng.choice([command, *SPELLINGS[command]]))
    if kind == "read" and rng.random() < 0.5:
        return _bash(rng, rng.choice(["cat ", "head -n 120 ", "sed -n 1,200p "]) + FILES[seed % len(FILES)])
    return _variant(rng, kind, seed)


def _variant(rng: random.Random, kind: str, seed: int) -> Action:
    """One way of writing the action `(kind, seed)`; every variant is equivalent."""
    if kind == "bash":
        return _bash(rng, COMMANDS[seed % len(COMMANDS)])
    if kind == "read":
        return _call("Read", file_path=_path(rng, FILES[seed % len(FILES)]))
    if kind == "edit":
        body = "\n".join(f"    line_{i} = {seed + i}" for i in range(20))
        return _call("Edit", file_path=_path(rng, FILES[seed % len(FILES)]), old_string=body,
                     new_string=body.replace("= ", "= 1 + "), **rng.choice([{}, {"replace_all": False}]))
    text = TEXTS[seed % len(TEXTS)]
    return Action(content=rng.choice([text, text.upper(), f"  {text}\n"]))


def make_states(n: int, teachers: int, seed: int = 0, spelled: bool = False) -> list[list[Proposal]]:
    rng = random.Random(seed)
    write = _spelled if spelled else _variant
    kinds = ["bash", "bash", "read", "edit", "text"]
    states = []
    for s in range(n):
        right = (rng.choice(kinds), rng.randrange(100))
        proposals = []
        for t in range(teachers):
            roll = rng.random()
            if roll < 0.08:
                action = None
            elif roll < 0.65:
                action = write(rng, *right)
            else:
                action = _variant(rng, rng.choice(kinds), rng.randrange(100))
            proposals.append(Proposal(state_id=f"bench:{s}", teacher=f"teacher-{t}", model=f"m{t}",
                                      action=action, error=None if action else "invalid_tool_arguments"))
        states.append(proposals)
    return states


def _outcome(result: object) -> tuple | None:
    if not hasattr(result, "reached"):
        return None
    return ("reached" if result.reached else result.reason, getattr(result, "match", None))  # type: ignore


def _caches() -> list[dict]:
    """The module caches a tree keeps across states (none in older trees)."""
    import consensus.canonical
    import consensus.intent

    found = [getattr(module, name, None) for module, name in ((consensus.canonical, "_CALLS"),
             (consensus.canonical, "_TEXTS"), (consensus.intent, "_CACHE"))]
    return [cache for cache in found if isinstance(cache, dict)]


def _time(label: str, states: list[list[Proposal]], fn: Callable[[list[Proposal]], object],
          cut: bool = False, cold: bool = False) -> list[tuple]:
    # CPU time of this process: on a shared machine, wall time mostly measures the neighbours.
    # Every result is kept until the timing ends, as a real caller keeps what it learns from it
    # (replay.run holds each state's verdicts.jsonl line, the result dumped, until the run is written),
    # so the cyclic GC's walks over live results count. `--cut-results` cuts each to (outcome, tier)
    # as it comes: that figure leaves the GC's share out and is no run's cost.
    caches = _caches() if cold else []
    gc.collect()
    start, wall = time.process_time(), time.perf_counter()
    kept: list[object] = []
    if cut:
        outcomes = [_outcome(fn(proposals)) for proposals in states]
    elif caches:
        for proposals in states:
            for cache in caches:   # --cold: every state canonicalised as if its commands were new
                cache.clear()
            kept.append(fn(proposals))
    else:   # as this bench measured before 61bdf5c
        kept = [fn(proposals) for proposals in states]
    seconds, elapsed = time.process_time() - start, time.perf_counter() - wall
    if not cut:
        outcomes = [_outcome(result) for result in kept]
    print(f"{label:<28} {len(states) / seconds:>10,.0f} states/s   ({seconds:.2f} s CPU, "
          f"{elapsed:.2f} s wall)")
    return [outcome for outcome in outcomes if outcome is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=10_000)
    parser.add_argument("--teachers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spelled", action="store_true",
                        help="also write the right action in other spellings of its intent")
    parser.add_argument("--cut-results", action="store_true",
                        help="cut each result to its outcome as it comes instead of keeping them all: "
                             "leaves the GC's walks over live results out (no real caller's cost)")
    parser.add_argument("--cold", action="store_true",
                        help="clear the canonical-call and intent-key caches before each state, as if "
                             "no command had been seen before (real sessions repeat less than these)")
    args = parser.parse_args()
    states = make_states(args.states, args.teachers, args.seed, args.spelled)
    if args.cut_results and args.cold:
        parser.error("--cold keeps the results: use it without --cut-results")
    how = {"cut": args.cut_results, "cold": args.cold}
    kept = "cut as they come" if args.cut_results else "kept"
    print(f"{args.states:,} states x {args.teachers} teachers{' (spelled)' if args.spelled else ''}, "
          f"results {kept}{', caches cold' if args.cold else ''}")
    _time("canonical forms", states, lambda ps: [canonical(p.action, CWD) for p in ps if p.action], **how)
    runs = [("vote", _time("vote", states, lambda ps: vote(ps, CWD), **how))]
    if "match" in inspect.signature(vote).parameters:  # a tree with tiers: today's exact vote too
        exact = _time("vote --match exact", states, lambda ps: vote(ps, CWD, match="exact"), **how)
        runs.append(("vote exact", exact))
    runs.append(("similarity", _time("similarity (threshold 0.9)", states, lambda ps: similarity(ps, CWD),
                                     **how)))
    for name, results in runs:
        reasons = Counter(outcome for outcome, _ in results)
        tiers = Counter(tier for outcome, tier in results if outcome == "reached")
        print(f"{name:<11} {dict(reasons)} {dict(tiers) if None not in tiers else ''}")


if __name__ == "__main__":
    main()
