"""vLLM's CPU build beside `transformers serve` on CPU, same model, same requests: tokens per second, and
one round of `replay.loop` with each engine.

    python bench/vllm_cpu.py --model models/smollm2 [--repeats 3] [--max-tokens 64]
        [--vllm-dtype bfloat16] [--vllm-args '--enforce-eager'] [--transformers-dtype auto]
        [--no-loop | --loop-only]

`--model` is the folder examples/make_smollm2.py writes. vLLM runs from tests/vllm_cpu.py's venv
($REPLAY_VLLM_PYTHON names another interpreter of a vLLM install), started as docs/loop.md ("vLLM on CPU")
says; `transformers serve` from this interpreter's environment, as `replay.loop --engine transformers`
starts it. Both servers are up at once and asked one request at a time, greedy, with a fixed max_tokens:
a few prompts, one of them with a tool and one with a long prompt. Each server answers every prompt once
to warm up (vLLM's first request compiles), then the repeats interleave (vLLM first in odd repeats,
transformers first in even ones). A repeat's tokens per second is its completion tokens over the seconds
its requests took (client side, non-streaming: prompt processing included). Prints each repeat side by
side with the ratio vLLM / transformers, the median, and whether the engines wrote the same text.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.vllm_cpu import SERVER_FLAGS, free_port, python_of, serve, server_env, stop  # noqa: E402

BASH = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command and return its output.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
CODE = "\n".join(f"def f{i}(x):\n    return x * {i} + {i % 7}\n" for i in range(40))
PROMPTS: list[tuple[str, dict[str, Any]]] = [
    ("haiku", {"messages": [{"role": "user", "content": "Write a haiku about the sea."}]}),
    ("explain", {"messages": [{"role": "user", "content": "Explain what a Python list comprehension is."}]}),
    ("tool", {"messages": [{"role": "system", "content": "You are a coding agent. Use the bash tool to act."},
                           {"role": "user", "content": "List the files in the current folder."}],
              "tools": [BASH]}),
    ("long prompt", {"messages": [{"role": "user", "content": f"{CODE}\nWhich of these functions returns "
                                                              "the largest value for x = 1? Explain."}]}),
]


@contextlib.contextmanager
def transformers_serve(dtype: str, log: Path) -> Iterator[str]:
    """`transformers serve` on CPU, as replay.loop's transformers engine starts it (plus --dtype)."""
    binary = shutil.which("transformers", path=os.path.dirname(sys.executable) + os.pathsep +
                          os.environ.get("PATH", ""))
    if binary is None:
        raise SystemExit("no `transformers` command here: pip install 'teacher-replay[loop]'")
    port = free_port()
    with open(log, "ab") as handle:
        process = subprocess.Popen([binary, "serve", "--host", "127.0.0.1", "--port", str(port), "--device",
                                    "cpu", "--dtype", dtype], stdout=handle, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            if process.poll() is not None:
                raise SystemExit(f"transformers serve exited ({process.returncode}); log: {log}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(process)


def ask(client: httpx.Client, url: str, model: str, prompt: dict[str, Any],
        max_tokens: int) -> tuple[int, float, str]:
    """(completion tokens, seconds, text) for one greedy request."""
    began = time.perf_counter()
    answer = client.post(f"{url}/chat/completions", json={"model": model, "temperature": 0,
                                                         "max_tokens": max_tokens, **prompt})
    seconds = time.perf_counter() - began
    answer.raise_for_status()
    body = answer.json()
    message = body["choices"][0]["message"]
    calls = [call["function"]["name"] + call["function"]["arguments"]
             for call in message.get("tool_calls") or []]
    return body["usage"]["completion_tokens"], seconds, (message.get("content") or "") + "".join(calls)


def measure(args: argparse.Namespace, urls: dict[str, str]) -> dict[str, list[tuple[int, float]]]:
    """Per engine, per repeat: (completion tokens, seconds) summed over the prompts."""
    model = str(args.model.resolve())
    runs: dict[str, list[tuple[int, float]]] = {name: [] for name in urls}
    texts: dict[str, dict[str, str]] = {name: {} for name in urls}
    with httpx.Client(timeout=900) as client:
        for name, url in urls.items():                 # warm-up: not timed
            for label, prompt in PROMPTS:
                texts[name][label] = ask(client, url, model, prompt, args.max_tokens)[2]
        for repeat in range(args.repeats):
            order = list(urls) if repeat % 2 == 0 else list(reversed(urls))
            for name in order:
                done = [ask(client, urls[name], model, prompt, args.max_tokens) for _, prompt in PROMPTS]
                runs[name].append((sum(d[0] for d in done), sum(d[1] for d in done)))
                print(f"repeat {repeat + 1} {name}: {runs[name][-1][0]} tokens in {runs[name][-1][1]:.1f} s",
                      flush=True)
    same = [label for label, _ in PROMPTS if texts["vllm"][label] == texts["transformers"][label]]
    print(f"same text from both engines (warm-up answers): {len(same)}/{len(PROMPTS)} {same}")
    return runs


def loop_round(args: argparse.Namespace, engine: str) -> tuple[float, dict[str, float]]:
    """One round of replay.loop with `engine` under args.logs/loop-ENGINE: (wall seconds, {round/stage:
    seconds} from its loop.json)."""
    import docker

    from tests.collect_toy import NAMESPACE, ensure_instance_images, toy_instance
    from tests.llm_server import LLMServer, Reply, chat_completion
    from tests.loop_student import PREFERRED

    def teacher(request: dict[str, Any]) -> Reply:
        return Reply(chat_completion("", [PREFERRED], model=request.get("model", "t"), prompt_tokens=1000,
                                     completion_tokens=10))

    folder = args.logs / f"loop-{engine}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    tag = ensure_instance_images(docker.from_env(), ["toy__calc-41", "toy__calc-42", "toy__calc-43"])
    for name, ids in (("train", ["toy__calc-42", "toy__calc-43"]), ("held", ["toy__calc-41"])):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(toy_instance(i, i)) + "\n" for i in ids))
    flags = shlex.join([*SERVER_FLAGS, "--dtype", args.vllm_dtype, *vllm_extra(args)])
    engine_args = (["--engine", "vllm", "--vllm-python", str(python_of()), "--vllm-args", flags]
                   if engine == "vllm" else ["--engine", "transformers"])
    with LLMServer(teacher) as teachers:
        pool = f"t1=openai/t1@{teachers.url}#price=1/2,t2=openai/t2@{teachers.url}#price=1/2"
        argv = ["--instances", str(folder / "train.jsonl"), "--held-out", str(folder / "held.jsonl"),
                "--student", str(args.model.resolve()), "--teachers", pool, "--out", str(folder / "out"),
                "--rounds", "1", "--cpu", "--max-turns", "2", "--max-tokens", "24", "--temperature", "0",
                "--test-split", "0.5", "--format", "sft", "--max-steps", "1", "--batch-size", "2",
                "--learning-rate", "0.05", "--train-args=--no-eval",
                "--collect-args", f"--namespace {NAMESPACE} --image-tag {tag}", *engine_args]
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "replay.loop", *argv], cwd=ROOT, env=server_env(),
                              capture_output=True, text=True)
        wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"replay.loop --engine {engine} exited {done.returncode}: {done.stderr[-600:]}")
    ledger = json.loads((folder / "out" / "loop.json").read_text())
    return wall, {f"{r}/{s}": d["seconds"] for r, v in sorted(ledger["rounds"].items())
                  for s, d in v["stages"].items()}


def vllm_extra(args: argparse.Namespace) -> list[str]:
    return shlex.split(args.vllm_args)


def print_loops(loops: dict[str, tuple[float, dict[str, float]]]) -> None:
    for engine in set(("vllm", "transformers")) - set(loops):
        loops[engine] = (float("nan"), {})
    stages = list(dict.fromkeys(k for _, seconds in loops.values() for k in seconds))
    print("\none round of replay.loop (seconds; round 0's stages, then round 1's)")
    print("| stage | vLLM CPU | transformers serve |\n|---|---|---|")
    for stage in stages:
        cells = [f"{loops[e][1][stage]:.1f}" if stage in loops[e][1] else "–"
                 for e in ("vllm", "transformers")]
        print(f"| {stage} | {cells[0]} | {cells[1]} |")
    for label, pick in (("round 1 (collect to eval)", lambda k: k.startswith("1/")),
                        ("all stages", lambda k: True)):
        sums = [sum(v for k, v in loops[e][1].items() if pick(k)) for e in ("vllm", "transformers")]
        print(f"| {label} | {sums[0]:.1f} | {sums[1]:.1f} |")
    print(f"| wall, the loop's command | {loops['vllm'][0]:.1f} | {loops['transformers'][0]:.1f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="examples/make_smollm2.py's folder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--vllm-dtype", default="bfloat16", help="vLLM's --dtype (bfloat16)")
    parser.add_argument("--vllm-args", default="", help="more vLLM flags, e.g. --enforce-eager (no compile "
                                                        "at start: vLLM CPU 0.32.0 compiles at every start)")
    parser.add_argument("--transformers-dtype", default="auto", help="transformers serve --dtype (auto)")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/vllm-cpu-bench"))
    parser.add_argument("--loop-engines", default="vllm,transformers",
                        help="the loop rounds to run, in order (vllm,transformers)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--no-loop", action="store_true", help="tokens per second only (no docker needed)")
    which.add_argument("--loop-only", action="store_true", help="the loop round only")
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    if not args.loop_only:
        tokens_per_second(args)
    if not args.no_loop:
        print_loops({engine: loop_round(args, engine) for engine in args.loop_engines.split(",")})
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


def tokens_per_second(args: argparse.Namespace) -> None:
    began = time.monotonic()
    # vLLM serves the folder under the path it was given, and the requests name that path.
    with serve(args.model.resolve(), "--dtype", args.vllm_dtype, *vllm_extra(args),
               log=args.logs / "vllm.log") as vllm_url:
        vllm_start = time.monotonic() - began
        with transformers_serve(args.transformers_dtype, args.logs / "transformers.log") as tf_url:
            runs = measure(args, {"vllm": vllm_url, "transformers": tf_url})
    print(f"\nvLLM started in {vllm_start:.0f} s; {len(PROMPTS)} prompts a repeat, "
          f"max_tokens {args.max_tokens}, greedy; vLLM --dtype {args.vllm_dtype} {args.vllm_args}, "
          f"transformers serve --dtype {args.transformers_dtype}")
    print("| repeat | vLLM CPU tok/s | transformers serve tok/s | ratio |\n|---|---|---|---|")
    ratios = []
    for repeat, (v, t) in enumerate(zip(runs["vllm"], runs["transformers"], strict=True), 1):
        ratios.append((v[0] / v[1]) / (t[0] / t[1]))
        print(f"| {repeat} | {v[0] / v[1]:.1f} ({v[0]} in {v[1]:.1f} s) | "
              f"{t[0] / t[1]:.1f} ({t[0]} in {t[1]:.1f} s) | {ratios[-1]:.2f}x |")
    print(f"median ratio vLLM / transformers: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    sys.exit(main())
