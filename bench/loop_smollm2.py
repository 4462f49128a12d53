"""The loop closed on a real pretrained student: SmolLM2-135M-Instruct, round 0 beside round 1.

    python bench/loop_smollm2.py --model models/smollm2 [--out /tmp/loop-bench] [--device cpu|cuda]

`--model` is the folder examples/make_smollm2.py writes. The toy SWE-bench instances (tests/collect_toy.py:
calc.py's add() subtracts) are rolled out by the student served by `transformers serve`; the teachers are
two loopback OpenAI-API servers that share one learnable preference (#36's scenario): they work the toy
fix step by step — read calc.py, fix add(), check it, say so — where the student, at round 0, answers in
prose. `python -m replay.loop --rounds 1` then does the rest: round 0's resolve rate and replay.eval at the
held-out states, round 1's rollouts, pairs, DPO with LoRA, the merged student served and measured again.
Prints loop.md's table (round 0 and round 1 side by side: consensus agreement and valid-call rate with
intervals and their paired difference, held_out.json before/after, resolve rate) and seconds per stage.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from tests.collect_toy import FIX, NAMESPACE, ensure_instance_images, toy_instance  # noqa: E402
from tests.llm_server import LLMServer, Reply, chat_completion  # noqa: E402


def teacher(request: dict[str, Any]) -> Reply:
    """The toy fix (tests/collect_toy.FIX), the step after the last one the state shows as done."""
    done = json.dumps(request.get("messages", []))
    step = 0
    if "cat calc.py" in done:
        step = 1
    if "return a + b" in done:
        step = 2
    if "print(add(2, 3))" in done:
        step = 3
    answer = FIX[step]
    if isinstance(answer, str):
        return Reply(chat_completion(answer, model=request.get("model", "t"), prompt_tokens=900,
                                     completion_tokens=30))
    return Reply(chat_completion("", answer, model=request.get("model", "t"), prompt_tokens=900,
                                 completion_tokens=30))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="examples/make_smollm2.py's folder")
    parser.add_argument("--out", type=Path, default=Path("/tmp/loop-bench"))
    parser.add_argument("--train", type=int, default=3, help="training instances (3)")
    parser.add_argument("--held", type=int, default=3, help="held-out instances (3)")
    parser.add_argument("--samples", type=int, default=2, help="rollouts per training instance (2)")
    parser.add_argument("--max-steps", type=int, default=8, help="DPO steps (8)")
    parser.add_argument("--device", default="cpu", help="transformers serve --device (cpu)")
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    args, extra = parser.parse_known_args()
    train = [f"toy__calc-{100 + i}" for i in range(args.train)]
    held = [f"toy__calc-{200 + i}" for i in range(args.held)]
    tag = ensure_instance_images(docker.from_env(), train + held)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, ids in (("train.jsonl", train), ("held.jsonl", held)):
        (args.out / name).write_text("".join(json.dumps(toy_instance(i, i)) + "\n" for i in ids))
    with LLMServer(teacher) as teachers:
        pool = f"t1=openai/t1@{teachers.url}#price=3/15,t2=openai/t2@{teachers.url}#price=3/15"
        command = [sys.executable, "-m", "replay.loop", "--instances", str(args.out / "train.jsonl"),
                   "--held-out", str(args.out / "held.jsonl"), "--student", str(args.model.resolve()),
                   "--teachers", pool, "--out", str(args.out / "loop"), "--rounds", "1",
                   "--device", args.device, "--max-turns", "3", "--max-tokens", "96", "--temperature", "0.7",
                   "--samples", str(args.samples), "--held-out-samples", "1", "--test-split", "0.25",
                   "--max-steps", str(args.max_steps), "--learning-rate", str(args.learning_rate),
                   "--batch-size", "2", "--max-length", "2048",
                   "--collect-args", f"--namespace {NAMESPACE} --image-tag {tag}",
                   # One CPU serves the student: replay.eval asks it two at a time, and waits for it.
                   "--run-args", "--per-teacher 2 --timeout 900",
                   *(["--cpu"] if args.device == "cpu" else []), *extra]
        began = time.monotonic()
        done = subprocess.run(command, cwd=ROOT)
        print(f"replay.loop exit {done.returncode} in {time.monotonic() - began:.0f} s; "
              f"{len(teachers.requests)} teacher requests")
    loop_md = args.out / "loop" / "loop.md"
    if loop_md.is_file():
        print(loop_md.read_text())
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
