"""Where does SmolLM2 begin to move? SFT on one round's pool answers, swept over steps, rows and learning
rate, judged at the held-out states only (#57's cheapest stage that shows movement: no rollouts, no resolve).

    python bench/learning_sweep.py --arm /tmp/learning/arm-pool-sft --round 1 --model models/smollm2 \\
        [--out /tmp/learning-sweep] [--steps 1,2,4,8] [--learning-rates 5e-4,2e-3] [--rows 0,4]

`--arm` is a bench/learning.py arm folder: its round's SFT pairs (`round-K/pairs`, replay.run --format sft)
are the training rows, its `heldout-run` the states and consensus every point is judged at, as the loop
judges a round. For each learning rate and each `--rows` (0: every row of the train split; N: its first N,
so steps past N see rows again), one LoRA run of max(--steps) steps from round 0's model, as replay.train
trains it (its options, trainer and seed), saves the adapter after each of --steps. Then one vLLM (the CPU
build, as bench/learning.py serves it) serves the base model as `round-0` and every adapter, and replay.eval
asks all of them at the held-out states (`--states all`, the loop's --max-tokens) against round 0, on a copy
of the held-out run and of the arm's cache (round 0's answers come from it). Prints, per point, consensus
agreement, the tool-call and valid rates with their paired differences against round 0 (95% intervals over
traces), the training seconds and the loss.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--arm", type=Path, required=True, help="a bench/learning.py arm folder (an SFT arm)")
    add("--round", type=int, default=1, help="whose pairs train (1)")
    add("--model", type=Path, required=True, help="round 0's model folder")
    add("--out", type=Path, default=Path("/tmp/learning-sweep"))
    add("--steps", default="1,2,4,8", help="adapters saved after these steps (1,2,4,8)")
    add("--learning-rates", default="5e-4,2e-3")
    add("--rows", default="0", help="distinct training rows per run: 0 = all of the split (0)")
    add("--batch-size", type=int, default=1)
    add("--max-tokens", type=int, default=96, help="the students' reply cap, as the loop's (96)")
    add("--skip-train", action="store_true", help="judge the adapters already under OUT")
    return parser.parse_args()


def train(args: argparse.Namespace, rate: float, rows: int, steps: list[int]) -> dict[str, Any]:
    """One LoRA run as replay.train runs it; the adapter saved after each of `steps`."""
    from transformers import TrainerCallback, set_seed

    from replay.train.data import TrainOptions, load_rows
    from replay.train.trainers import build_trainer, load_student

    tag = f"lr{rate:g}-rows{rows or 'all'}"
    options = TrainOptions(dataset=args.arm / f"round-{args.round}" / "pairs", model=str(args.model),
                           format="sft", output=args.out / tag, max_steps=max(steps),
                           batch_size=args.batch_size, learning_rate=rate, cpu=True, evaluate=False,
                           max_length=2048, seed=0)
    set_seed(options.seed)
    data = load_rows(options)
    train_rows = data.train.select(range(min(rows, data.train.num_rows))) if rows else data.train
    model, tokenizer = load_student(options)
    began = time.monotonic()
    seconds: dict[int, float] = {}

    class Save(TrainerCallback):
        def on_step_end(self, _args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step in steps:
                kwargs["model"].save_pretrained(str(args.out / tag / f"step-{state.global_step}"))
                seconds[state.global_step] = round(time.monotonic() - began, 1)

    trainer = build_trainer(options, model, tokenizer, train_rows, None, data.max_length)
    trainer.add_callback(Save())
    trainer.train()
    losses = [round(log["loss"], 3) for log in trainer.state.log_history if "loss" in log]
    return {"tag": tag, "rate": rate, "rows": train_rows.num_rows, "seconds": seconds, "losses": losses}


def judge(args: argparse.Namespace, adapters: dict[str, Path]) -> dict[str, Any]:
    """replay.eval of round 0 and every adapter at the arm's held-out states, on copies."""
    from tests.vllm_cpu import serve

    run = args.out / "heldout-run"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(args.arm / "heldout-run", run)
    shutil.copyfile(args.arm / "teacher-cache.sqlite", args.out / "teacher-cache.sqlite")
    settings = json.loads((run / "run.json").read_text())
    settings["pool"]["cache"] = str((args.out / "teacher-cache.sqlite").resolve())
    (run / "run.json").write_text(json.dumps(settings, indent=2))
    modules = [f"{name}={path.resolve()}" for name, path in adapters.items()]
    extra = ["--enforce-eager", "--served-model-name", "round-0", "--max-loras", str(len(modules)),
             "--lora-modules", *modules]
    with serve(args.model, *extra, lora=True, log=args.out / "vllm.log") as url:   # SERVER_FLAGS, LoRA
        models = ",".join(f"{name}=openai/{name}@{url}#price=0/0" for name in ["round-0", *adapters])
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "replay.eval", "--run", str(run), "--models", models,
                               "--states", "all", "--seed", "0", "--max-tokens", str(args.max_tokens)],
                              cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"replay.eval failed: {done.stderr.strip()[-400:]}")
    report = json.loads((run / "eval" / "eval.json").read_text())
    report["seconds"] = round(time.monotonic() - began, 1)
    return report


def cell(block: dict[str, Any] | None, signed: bool = False) -> str:
    if not block or block.get("value") is None:
        return "–"
    value = f"{block['value']:+.2f}" if signed else f"{block['value']:.2f}"
    return f"{value} [{block['low']:.2f}, {block['high']:.2f}]" if block.get("low") is not None else value


def main() -> int:
    args = parse()
    steps = sorted(int(s) for s in args.steps.split(","))
    rates = [float(r) for r in args.learning_rates.split(",")]
    row_counts = [int(r) for r in args.rows.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    runs_file = args.out / "runs.json"
    runs = json.loads(runs_file.read_text()) if args.skip_train and runs_file.is_file() else []
    if not args.skip_train:
        for rows in row_counts:
            for rate in rates:
                runs.append(train(args, rate, rows, steps))
                print(f"trained {runs[-1]['tag']}: {runs[-1]['rows']} rows, seconds at steps "
                      f"{runs[-1]['seconds']}, losses {runs[-1]['losses']}", flush=True)
                runs_file.write_text(json.dumps(runs, indent=2))
    adapters = {f"{run['tag']}-s{step}": args.out / run["tag"] / f"step-{step}"
                for run in runs for step in steps}
    report = judge(args, adapters)
    by_name = {m["name"]: m["rates"] for m in report["models"]}
    diffs = {d["second"]: d["rates"] for d in report["differences"] if d["first"] == "round-0"}
    print(f"\nheld-out states: {by_name['round-0']['tool_call']['n']}; replay.eval {report['seconds']} s\n")
    print("| learning rate | rows | steps | consensus agreement | Δ vs round 0 | tool calls | Δ vs round 0 | "
          "valid | Δ vs round 0 | train s | loss at that step |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    base = by_name["round-0"]
    print(f"| – | – | 0 | {cell(base['consensus_intent'])} | – | {cell(base['tool_call'])} | – | "
          f"{cell(base['valid'])} | – | – | – |")
    for run in runs:
        for step in steps:
            name = f"{run['tag']}-s{step}"
            mine, diff = by_name.get(name, {}), diffs.get(name, {})
            loss = run["losses"][step - 1] if len(run["losses"]) >= step else "–"
            took = run["seconds"].get(str(step), run["seconds"].get(step))
            print(f"| {run['rate']:g} | {run['rows']} | {step} | {cell(mine.get('consensus_intent'))} | "
                  f"{cell(diff.get('consensus_intent'), True)} | {cell(mine.get('tool_call'))} | "
                  f"{cell(diff.get('tool_call'), True)} | {cell(mine.get('valid'))} | "
                  f"{cell(diff.get('valid'), True)} | {took} | "
                  f"{loss} |")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
