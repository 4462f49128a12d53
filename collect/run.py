"""`python -m collect.run`: a student on a vLLM server solves SWE-bench instances in their containers.

Thin on purpose: parse flags, call collect.runner.collect_rollouts, print a summary.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collect.report import RunReport

EXIT_USER_ERROR, EXIT_NOTHING_DONE, EXIT_INTERRUPTED = 2, 1, 130


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collect.run",
        description="Live SWE-bench rollouts: a student served by vLLM drives a bash/edit agent (or "
                    "Claude Code, --agent claude-code) inside each instance's docker image; writes "
                    "DIR/<instance_id>.rollout.jsonl (claude-code: DIR/<instance_id>/) and DIR/report.json.")
    add = parser.add_argument
    add("--instances", type=Path, required=True, help="SWE-bench instances, JSONL or a JSON list")
    add("--student-url", default=None,
        help="OpenAI-compatible base URL of the vLLM server, e.g. http://localhost:8000/v1 (with "
             "--student-provider: the provider's endpoint, default its own)")
    add("--student-model", required=True, help="the served model name, as vLLM knows it")
    add("--student-provider", default=None, metavar="NAME",
        help="an official API as the student, through litellm (openai, anthropic, ...): same agents and "
             "grading, no token ids; the key comes from --api-key or the provider's usual variable")
    add("--out", type=Path, required=True, help="output folder")
    add("--max-turns", type=int, default=30, help="student turns per instance (default 30)")
    add("--workers", type=int, default=1, help="instances rolled out in parallel (default 1)")
    add("--samples", type=int, default=1,
        help="rollouts per instance (default 1); sample k > 0 is written as <instance_id>.s<k>.rollout.jsonl "
             "(claude-code: DIR/<instance_id>.s<k>/)")
    add("--seed", type=int, default=None, metavar="N",
        help="send each rollout a seed of its own, drawn from N, the instance and the sample (a vLLM "
             "student; recorded in the header's sampling); default: none, the server's own randomness")
    add("--evaluate", action="store_true", help="grade each patch with the swebench harness (reward)")
    add("--allow-empty", action="store_true",
        help="exit 0 even when no rollout took a turn (default: such a run, e.g. every rollout at "
             "context_overflow on turn 0, says so and exits 1)")
    add("--namespace", default="swebench", help="image namespace (default swebench)")
    add("--image-tag", default="latest", help="image tag (default latest)")
    add("--pull", action="store_true", help="pull a missing instance image (default: never pull)")
    add("--temperature", type=float, default=None, help="sampling temperature (default: the server's)")
    add("--top-p", type=float, default=None, help="nucleus sampling (default: the server's)")
    add("--max-tokens", type=int, default=None, help="completion tokens per turn (default: the server's)")
    add("--logprobs-mode", default="raw_logprobs",
        choices=["raw_logprobs", "processed_logprobs", "raw_logits", "processed_logits"],
        help="what the vLLM server was started with (`vllm serve --logprobs-mode`, default raw_logprobs: "
             "before temperature and top-p); recorded in every rollout, the API cannot tell")
    add("--reasoning-echo", default="auto", choices=["auto", "field", "inline", "none"],
        help="how a reply's reasoning goes back to the server: `field` (vLLM >= 0.12 reads `reasoning`), "
             "`inline` between <think> tags (vLLM <= 0.11 drops request reasoning), `none`; auto: the "
             "reply goes back as generated (its text from /detokenize), its reasoning by the field the "
             "server answers with")
    add("--request-timeout", type=float, default=600.0,
        help="seconds to wait for one student reply (default 600); a timeout is not retried")
    add("--command-timeout", type=int, default=120, help="seconds per bash command (default 120)")
    add("--output-limit", type=int, default=20_000, help="bytes of command output kept (default 20000)")
    add("--mem-limit", default="8g", help="container memory limit (default 8g)")
    add("--cpus", type=float, default=2.0, help="container CPU limit (default 2)")
    add("--eval-timeout", type=int, default=1800, help="seconds for the harness's test run (default 1800)")
    add("--api-key", default=os.environ.get("REPLAY_STUDENT_API_KEY", "EMPTY"),
        help="API key for the student server (default $REPLAY_STUDENT_API_KEY or EMPTY)")
    add("--ray", default=None, metavar="ADDRESS",
        help="run the rollouts as Ray tasks: `auto` (the cluster `ray start` made on this machine), "
             "HOST:PORT or ray://HOST:PORT, or `local` to start one here (127.0.0.1 only); nodes with a "
             "docker engine advertise a `docker` resource (see README). A rerun skips finished rollouts")
    add("--ray-dashboard", action="store_true",
        help="with --ray local: start Ray's dashboard and job API too, on 127.0.0.1 (default: off; the job "
             "API runs code for anyone who can reach it)")
    add("-q", "--quiet", action="store_true", help="no per-instance progress lines")
    add("--agent", choices=["mini", "claude-code"], default="mini",
        help="mini: the bash/edit loop (default); claude-code: the student drives Claude Code")
    claude = parser.add_argument_group("Claude Code (--agent claude-code, see collect/claude_code.py)")
    claude.add_argument("--claude-binary", type=Path, default=None,
                        help="the native Claude Code CLI to copy into each container (default: "
                             "$REPLAY_CLAUDE_BINARY, the pinned version fetched by `python -m "
                             "collect.claude_code_cli fetch`, else the image's own `claude`)")
    claude.add_argument("--claude-model", default="claude-sonnet-4-6",
                        help="the model name Claude Code asks for as its main model; --student-model "
                             "serves it (default claude-sonnet-4-6)")
    claude.add_argument("--claude-small-model", default="claude-haiku-4-5",
                        help="Claude Code's small/fast model name (default claude-haiku-4-5)")
    claude.add_argument("--small-model", default=None,
                        help="the served model answering --claude-small-model (default: --student-model)")
    claude.add_argument("--small-url", default=None,
                        help="the server of --small-model, e.g. a second vLLM (default: --student-url)")
    claude.add_argument("--claude-timeout", type=int, default=1800,
                        help="seconds for one Claude Code session (default 1800)")
    return parser.parse_args(argv)


def _claude_options(args: argparse.Namespace) -> object:
    """ClaudeCodeOptions for --agent claude-code (None for mini); a bad --claude-binary fails here, early
    (with --ray, on each node: the path is the nodes')."""
    if args.agent != "claude-code":
        return None
    from collect.claude_code import ClaudeCodeOptions
    from collect.claude_code_cli import find_binary, load_claude_code_spec

    if not args.ray:
        find_binary(args.claude_binary, load_claude_code_spec())
    return ClaudeCodeOptions(binary=args.claude_binary, model=args.claude_model,
                             small_model=args.claude_small_model, small_backend=args.small_model,
                             small_url=args.small_url, timeout=args.claude_timeout)


CLAUDE_FLAGS = {"binary": "--claude-binary", "model": "--claude-model", "small_model": "--claude-small-model",
                "small_backend": "--small-model", "small_url": "--small-url", "timeout": "--claude-timeout"}


def _one_line(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):               # pydantic: name the flag
        first = errors()[0]
        return f"{CLAUDE_FLAGS.get(str(first['loc'][0]), first['loc'][0])}: {first['msg']}"
    return str(exc)


def _raise_interrupt(signum: int, frame: object) -> None:
    # Once: the cleanup that follows (containers, network, report.json) must not be cut short by the
    # next Ctrl-C of an impatient user, so later signals only say what is going on.
    for each in STOP_SIGNALS:
        signal.signal(each, _still_stopping)
    raise KeyboardInterrupt


def _still_stopping(signum: int, frame: object) -> None:
    print("collect.run: stopping: removing containers and writing report.json", file=sys.stderr)


# Installed explicitly: a process started in the background by a script (`collect.run ... &`) inherits
# SIGINT ignored, and Python then never turns it into KeyboardInterrupt. SIGTERM (CI timeouts, `kill`)
# and SIGHUP (a closed terminal) clean up exactly like Ctrl-C.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for each in STOP_SIGNALS:
        signal.signal(each, _raise_interrupt)
    if args.student_url is None and args.student_provider is None:
        print("collect.run: error: --student-url is required (or --student-provider NAME for an official "
              "API)", file=sys.stderr)
        return EXIT_USER_ERROR
    from pydantic import ValidationError

    from collect.config import CollectConfig, CollectError
    from collect.runner import collect_rollouts

    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="collect: %(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)   # one INFO line per request otherwise
    try:
        config = CollectConfig(
            instances=args.instances, student_url=args.student_url, student_model=args.student_model,
            student_provider=args.student_provider, out=args.out, api_key=args.api_key,
            max_turns=args.max_turns, workers=args.workers, samples=args.samples, seed=args.seed,
            evaluate=args.evaluate,
            namespace=args.namespace,
            image_tag=args.image_tag, pull=args.pull, temperature=args.temperature, top_p=args.top_p,
            max_tokens=args.max_tokens, logprobs_mode=args.logprobs_mode, reasoning_echo=args.reasoning_echo,
            request_timeout=args.request_timeout, command_timeout=args.command_timeout,
            output_limit=args.output_limit, mem_limit=args.mem_limit, cpus=args.cpus,
            eval_timeout=args.eval_timeout)
    except ValidationError as exc:
        error = exc.errors()[0]
        flag = "--" + str(error["loc"][0]).replace("_", "-")
        print(f"collect.run: error: {flag}: {error['msg']}", file=sys.stderr)
        return EXIT_USER_ERROR
    try:
        claude = _claude_options(args)
    except (ValidationError, CollectError) as exc:
        print(f"collect.run: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    if args.seed is not None and args.student_provider is not None:
        print("collect.run: error: --seed: a vLLM student only (official APIs take no seed, or not all)",
              file=sys.stderr)
        return EXIT_USER_ERROR
    try:
        if args.ray:
            from collect.on_ray import collect_on_ray

            report = collect_on_ray(config, args.ray, args.ray_dashboard, quiet=args.quiet, claude=claude)
        else:
            report = collect_rollouts(config, claude=claude)
    except CollectError as exc:
        print(f"collect.run: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:              # before any container existed: nothing to clean up
        print("collect.run: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(report.summary())
    print(f"report: {config.out / 'report.json'}")
    return exit_code(report, args.allow_empty)


def exit_code(report: RunReport, allow_empty: bool = False) -> int:
    """0 when some rollout ended without an error and took a turn; a run in which no rollout took a turn
    is EXIT_NOTHING_DONE (said on stderr) unless `--allow-empty`; an interrupted one EXIT_INTERRUPTED."""
    if report.interrupted:
        return EXIT_INTERRUPTED
    if report.empty and not allow_empty:
        ends = ", ".join(f"{n} {status}" for status, n in sorted(report.exit_status.items())) or "no rollout"
        print(f"collect.run: no rollout took a turn ({ends}; why per rollout in report.json): exit "
              f"{EXIT_NOTHING_DONE} (--allow-empty accepts it)", file=sys.stderr)
        return EXIT_NOTHING_DONE
    return 0 if report.ok or not report.instances else EXIT_NOTHING_DONE


if __name__ == "__main__":
    sys.exit(main())
