"""`python -m replay.run`: agent traces in, DPO preference data out."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ingestion.options import DEFAULT_MAX_MESSAGE_CHARS, DEFAULT_MAX_PROMPT_TOKENS, IngestOptions
from ingestion.schema import ReplayError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m replay.run",
        description="Turn Claude Code sessions or SWE-bench rollouts into DPO pairs: a pool of teacher "
                    "LLMs answers every assistant turn; their consensus is `chosen`, the student's "
                    "real action `rejected`.")
    parser.add_argument("--source", type=Path, required=True,
                        help="a session .jsonl, a project folder, or ~/.claude/projects (searched "
                             "recursively); rollout dirs from collect.run work too")
    parser.add_argument("--out", type=Path, default=Path("replay-out"),
                        help="output folder (default: ./replay-out)")
    parser.add_argument("--dry-run", action="store_true",
                        help="ingest and estimate only: write states.jsonl and report.json, call nothing")
    ingest = parser.add_argument_group("ingestion")
    ingest.add_argument("--include-subagents", action="store_true",
                        help="also read subagent / sidechain transcripts as traces of their own")
    ingest.add_argument("--max-states", type=int, default=None, metavar="N",
                        help="stop after N states")
    ingest.add_argument("--max-message-chars", type=int, default=DEFAULT_MAX_MESSAGE_CHARS, metavar="N",
                        help=f"cut any message longer than this to head + tail "
                             f"(default {DEFAULT_MAX_MESSAGE_CHARS})")
    ingest.add_argument("--max-prompt-tokens", type=int, default=DEFAULT_MAX_PROMPT_TOKENS, metavar="N",
                        help=f"drop the oldest turns of prompts estimated over this "
                             f"(default {DEFAULT_MAX_PROMPT_TOKENS}, fits a 128k-token teacher)")
    return parser


def ingest_options(args: argparse.Namespace) -> IngestOptions:
    return IngestOptions(include_subagents=args.include_subagents, max_states=args.max_states,
                         max_message_chars=args.max_message_chars, max_prompt_tokens=args.max_prompt_tokens)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from replay.pipeline import dry_run
    from replay.summary import print_summary

    try:
        if not args.dry_run:
            raise ReplayError("teachers are not wired yet: run with --dry-run to ingest and inspect states")
        report = dry_run(args.source, args.out, ingest_options(args))
    except ReplayError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print_summary(report, str(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
