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

EXIT_USER_ERROR, EXIT_NOTHING_DONE, EXIT_INTERRUPTED = 2, 1, 130


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collect.run",
        description="Live SWE-bench rollouts: a student served by vLLM drives a bash/edit agent (or "
                    "Claude Code, --agent claude-code) inside each instance's docker image; writes "
                    "DIR/<instance_id>.rollout.jsonl (claude-code: DIR/<instance_id>/) and DIR/report.json.")
    add = parser.add_argument
    add("--instances", type=Path, required=True, help="SWE-bench instances, JSONL or a JSON list")
    add("--student-url", required=True, help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1")
    add("--student-model", required=True, help="the served model name, as vLLM knows it")
    add("--out", type=Path, required=True, help="output folder")
    add("--max-turns", type=int, default=30, help="student turns per instance (default 30)")
    add("--workers", type=int, default=1, help="instances rolled out in parallel (default 1)")
    add("--evaluate", action="store_true", help="grade each patch with the swebench harness (reward)")
    add("--namespace", default="swebench", help="image namespace (default swebench)")
    add("--image-tag", default="latest", help="image tag (default latest)")
    add("--pull", action="store_true", help="pull a missing instance image (default: never pull)")
    add("--temperature", type=float, default=None, help="sampling temperature (default: the server's)")
    add("--max-tokens", type=int, default=None, help="completion tokens per turn (default: the server's)")
    add("--command-timeout", type=int, default=120, help="seconds per bash command (default 120)")
    add("--output-limit", type=int, default=20_000, help="bytes of command output kept (default 20000)")
    add("--mem-limit", default="8g", help="container memory limit (default 8g)")
    add("--cpus", type=float, default=2.0, help="container CPU limit (default 2)")
    add("--eval-timeout", type=int, default=1800, help="seconds for the harness's test run (default 1800)")
    add("--api-key", default=os.environ.get("REPLAY_STUDENT_API_KEY", "EMPTY"),
        help="API key for the student server (default $REPLAY_STUDENT_API_KEY or EMPTY)")
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
    claude.add_argument("--claude-timeout", type=int, default=1800,
                        help="seconds for one Claude Code session (default 1800)")
    return parser.parse_args(argv)


def _claude_options(args: argparse.Namespace) -> object:
    """ClaudeCodeOptions for --agent claude-code (None for mini); a bad --claude-binary fails here, early."""
    if args.agent != "claude-code":
        return None
    from collect.claude_code import ClaudeCodeOptions
    from collect.claude_code_cli import find_binary, load_claude_code_spec

    find_binary(args.claude_binary, load_claude_code_spec())
    return ClaudeCodeOptions(binary=args.claude_binary, model=args.claude_model,
                             small_model=args.claude_small_model, small_backend=args.small_model,
                             timeout=args.claude_timeout)


CLAUDE_FLAGS = {"binary": "--claude-binary", "model": "--claude-model", "small_model": "--claude-small-model",
                "small_backend": "--small-model", "timeout": "--claude-timeout"}


def _one_line(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):               # pydantic: name the flag
        first = errors()[0]
        return f"{CLAUDE_FLAGS.get(str(first['loc'][0]), first['loc'][0])}: {first['msg']}"
    return str(exc)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (CI timeouts, `kill`) cleans up exactly like Ctrl-C


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pydantic import ValidationError

    from collect.config import CollectConfig, CollectError
    from collect.runner import collect_rollouts

    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="collect: %(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)   # one INFO line per request otherwise
    try:
        config = CollectConfig(
            instances=args.instances, student_url=args.student_url, student_model=args.student_model,
            out=args.out, api_key=args.api_key, max_turns=args.max_turns, workers=args.workers,
            evaluate=args.evaluate, namespace=args.namespace, image_tag=args.image_tag, pull=args.pull,
            temperature=args.temperature, max_tokens=args.max_tokens, command_timeout=args.command_timeout,
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
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        report = collect_rollouts(config, claude=claude)
    except CollectError as exc:
        print(f"collect.run: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:              # before any container existed: nothing to clean up
        print("collect.run: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(report.summary())
    print(f"report: {config.out / 'report.json'}")
    if report.interrupted:
        return EXIT_INTERRUPTED
    return 0 if report.ok or not report.instances else EXIT_NOTHING_DONE


if __name__ == "__main__":
    sys.exit(main())
