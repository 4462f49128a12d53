"""`python -m replay.run`: agent traces in, DPO preference data out.

Exit codes: 0 done; 1 the run failed (cache fault, more than --max-failed of the states failed) and
OUT was left as it was; 2 bad flags or input, before any work; 130 / 143 interrupted by SIGINT /
SIGTERM (every answer received is in the cache, OUT as it was).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ingestion.options import DEFAULT_MAX_MESSAGE_CHARS, DEFAULT_MAX_PROMPT_TOKENS, IngestOptions
from ingestion.schema import ReplayError
from ingestion.scope import Scope
from replay.flags import at_least, fraction, out_folder, positive_float, seconds, usd
from replay.options import ConsensusOptions, ExportOptions, PoolOptions, RunConfig
from replay.select.filters import SelectError, parse_filter
from replay.signals import interrupted_exit, kept, stop_signals

if TYPE_CHECKING:
    from teachers.registry import TeacherSpec


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (its usage block is many), exit 2 as argparse's."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see --help)\n")


def select_value(text: str) -> str:
    """A --select value, checked (one line, exit 2, when it is not a filter)."""
    try:
        parse_filter(text)
    except SelectError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--select ")) from None
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m replay.run",
        description="Turn coding-agent traces (Claude Code, Codex CLI, Gemini CLI and Copilot CLI "
                    "sessions, SWE-bench rollouts) into DPO pairs: a pool of teacher LLMs answers every "
                    "assistant turn; their consensus is `chosen`, the student's real action `rejected` "
                    "(or KTO / SFT rows: --format).",
        epilog="example: python -m replay.run --source ~/.claude/projects --teachers gpt-5,deepseek")
    parser.add_argument("--source", action="append", required=True, metavar="PATH[,PATH…]",
                        help="where the traces are; repeat it or separate paths with commas: session "
                             "files and folders searched recursively, any mix of ~/.claude/projects, "
                             "~/.codex/sessions, ~/.gemini/tmp, ~/.copilot/session-state, rollout dirs "
                             "from collect.run, and trajectories (mini-swe-agent *.traj.json, SWE-agent "
                             "*.traj, OpenHands output.jsonl, Harbor ATIF, saved/parquet/jsonl trajectory "
                             "datasets); each file's format is told by its content")
    parser.add_argument("--out", type=out_folder, default=Path("replay-out"),
                        help="output folder (default: ./replay-out); a run writes into a hidden folder "
                             "inside it and swaps it in at the end")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty folder replay.run did not make (nothing in it is "
                             "deleted or replaced)")
    parser.add_argument("--dry-run", action="store_true",
                        help="ingest and estimate only: write the states (states.jsonl + traces.jsonl; "
                             "python -m replay.states OUT prints them in full) and report.json (with tokens "
                             "and USD per teacher when --teachers is given), call nothing")
    _ingest_flags(parser.add_argument_group("ingestion"))
    _teacher_flags(parser.add_argument_group("teachers"))
    _consensus_flags(parser.add_argument_group("consensus"))
    _export_flags(parser.add_argument_group("output"))
    return parser


def _ingest_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--include-subagents", action="store_true",
                       help="also read subagent / sidechain transcripts as traces of their own")
    group.add_argument("--max-states", type=at_least(1), default=None, metavar="N",
                       help="stop after N states")
    group.add_argument("--select", type=select_value, action="append", default=[], metavar="FILTER",
                       help="ask the teachers about these states only; repeat to combine (AND), commas "
                            "within one are OR: outcome=error,rejected,interrupted (or failed), "
                            "tool=Edit,Bash, after-failure=N (a failed state and the N after it), "
                            "per-trace=N[:SEED] (a seeded sample). The others are counted "
                            "(states_unselected), never sent")
    group.add_argument("--project", action="append", default=[], metavar="GLOB",
                       help="read only the projects this glob matches (repeatable): the project folder's "
                            "name (-Users-me-work-app) or the cwd the sessions recorded (/Users/me/work/app, "
                            "or its last part, app); the others are counted (report.json filtered), never "
                            "written or sent")
    group.add_argument("--exclude-project", action="append", default=[], metavar="GLOB",
                       help="leave out the projects this glob matches, by folder name or recorded cwd "
                            "(repeatable; wins over --project)")
    group.add_argument("--since", type=when(end=False), metavar="WHEN",
                       help="only turns at or after WHEN: a date (2025-07-01, local time), an ISO time, or a "
                            "duration back from now (7d, 12h, 2w); earlier turns stay as context of later "
                            "ones where the prompt budgets keep them")
    group.add_argument("--until", type=when(end=True), metavar="WHEN",
                       help="only turns before WHEN (a date includes that day; or an ISO time, or a duration "
                            "back from now)")
    group.add_argument("--max-message-chars", type=at_least(100), default=DEFAULT_MAX_MESSAGE_CHARS,
                       metavar="N",
                       help=f"cut any message longer than this to head + tail (default "
                            f"{DEFAULT_MAX_MESSAGE_CHARS})")
    group.add_argument("--max-prompt-tokens", type=at_least(100), default=DEFAULT_MAX_PROMPT_TOKENS,
                       metavar="N",
                       help=f"drop the oldest turns of prompts estimated over this (default "
                            f"{DEFAULT_MAX_PROMPT_TOKENS}, fits a 128k-token teacher)")
    group.add_argument("--max-length", type=at_least(1), default=None, metavar="N",
                       help="the length you will train at (tokens): every state is fitted when it is read so "
                            "that prompt + tools + the longer of chosen and rejected fit N (oldest exchanges "
                            "dropped, long messages cut to head + tail, 1/8 of N kept for the completion); "
                            "rows still longer are dropped at export and counted")
    group.add_argument("--tokenizer", metavar="NAME_OR_PATH",
                       help="count tokens with this tokenizer (default: --preflight-tokenizer, else an "
                            "estimate of 4 characters per token)")
    group.add_argument("--ingest-workers", type=trace_parallel, default=None, metavar="N",
                       help="processes that read and redact files at once (default auto: one per core, "
                            "at most 8, when the source holds 64 MB or more; 1 reads in this process); "
                            "the states are the same either way")


def _teacher_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--teachers", metavar="POOL",
                       help="comma-separated: aliases from configs/teachers.toml (gpt-5, deepseek, ...), "
                            "litellm model strings, or name=openai/<model>@http://host:port/v1")
    group.add_argument("--cache", type=Path, default=None,
                       help="SQLite response cache (default: $REPLAY_CACHE or the user cache dir)")
    group.add_argument("--concurrency", type=at_least(1), default=16, metavar="N",
                       help="calls in flight, all teachers, at most (16)")
    group.add_argument("--per-teacher", type=at_least(1), default=8, metavar="N",
                       help="calls in flight per teacher, at most (8): pacing starts at 2, grows while "
                            "answers come back clean, halves on a 429, and follows the rate limits a "
                            "provider states in its headers")
    group.add_argument("--trace-parallel", type=trace_parallel, default=None, metavar="K",
                       help="states of one trace in flight at once, sent in waves so each still finds the "
                            "prefix it shares with an earlier state in the provider's prompt cache: K, or "
                            "auto (default: waves of up to 8, sized per trace to cost at most 10%% more "
                            "than one state at a time; --dry-run prints time and cost for K = 1 and this)")
    group.add_argument("--samples", type=at_least(1), default=1, metavar="N",
                       help="answers per teacher per state")
    group.add_argument("--timeout", type=positive_float, default=120.0, metavar="S",
                       help="seconds per attempt")
    group.add_argument("--max-cost", type=usd, default=None, metavar="USD",
                       help="stop making new calls once this much is spent (cache hits stay free); the "
                            "states left unasked count as failed (see --max-failed)")
    group.add_argument("--max-failed", type=fraction(upper_open=False), default=0.1, metavar="F",
                       help="if more than this share of the states put to teachers failed (no usable "
                            "answer), exit 1 and leave OUT as it was (0.1)")
    group.add_argument("--allow-same-family", action="store_true",
                       help="let teachers of the student's own family vote (off: they are excluded)")
    group.add_argument("--no-redact", action="store_true",
                       help="keep the sessions' raw text in requests and every output (default: secrets "
                            "are redacted once, right after ingestion; the dataset card says which)")
    group.add_argument("--no-pseudonymise", action="store_true",
                       help="keep personal data as it is (default: user names of home paths, e-mail "
                            "addresses and the names before them (Author: NAME <address>), machine names, "
                            "public IP addresses and phone numbers become stable "
                            "placeholders in requests and every output; the dataset card says which)")
    group.add_argument("--no-names", action="store_true",
                       help="keep people's names in prose as they are (default, with the names extra "
                            "installed: names in user prompts and assistant text, found by spaCy's English "
                            "NER and a list of given names, become person-<tag>; see docs/security.md)")
    group.add_argument("--max-response-mb", type=positive_float, default=10.0, metavar="MB",
                       help="a teacher answer larger than this is a counted failure, never read whole (10)")
    group.add_argument("--batch", action="store_true",
                       help="send OpenAI and Anthropic teachers' calls through their batch APIs at half "
                            "price (answers within 24 h; a killed run resumes polling the same batches); "
                            "others are called directly")
    group.add_argument("--batch-poll", type=seconds, default=30.0, metavar="S",
                       help="seconds between polls of submitted batches (30)")


def _consensus_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--consensus", choices=["vote", "similarity", "judge", "weighted"], default="vote",
                       help="vote: strict majority of equivalent actions (default); similarity: medoid "
                            "of the largest near-equal group; judge: an LLM picks, blind; weighted: vote "
                            "with each teacher weighed by its reliability, estimated from all the run's "
                            "answers (Dawid-Skene), so states are decided once every answer is in")
    group.add_argument("--min-agreement", type=fraction(upper_open=True), default=0.5, metavar="F",
                       help="the winning group must hold more than this share of the voters (0.5)")
    group.add_argument("--match", choices=["exact", "intent"], default="intent",
                       help="the loosest tier two actions may agree at: intent (default) votes on exact "
                            "canonical forms first, then on intent keys (cat a.py = Read a.py); exact "
                            "stops after the first tier. The student agrees at the same tiers")
    group.add_argument("--judge", metavar="MODEL", help="the judge for --consensus judge (alias or model)")
    group.add_argument("--early-stop", action="store_true",
                       help="ask teachers one at a time, cheapest first, and stop once the rest cannot "
                            "change the outcome (saves calls; ablations then lack the skipped answers)")


def _export_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--preflight-tokenizer", metavar="PATH",
                       help="the tokenizer you train with: drop pairs its chat template cannot render, "
                            "not as a prompt-prefix of chosen/rejected, without their tool calls, with "
                            "chosen rendered as rejected, or longer than --max-length (counted)")
    group.add_argument("--preflight-template", metavar="NAMES", default="",
                       help="comma-separated chat templates to check every pair against, never dropping: "
                            "names shipped in configs/chat_templates (qwen3, qwen3_coder, llama3.1, hermes, "
                            "gemma3), a .jinja file, or a tokenizer path / Hub name; per-row results go in "
                            "the `preflight` column, pass rates in report.json and the card")
    group.add_argument("--test-split", type=fraction(upper_open=True, lower_open=True), default=None,
                       metavar="F", help="write `train` and `test` splits, about F of the pairs in `test`, "
                                         "grouped by trace_id (no trace in both)")
    group.add_argument("--format", choices=["dpo", "kto", "sft"], default="dpo",
                       help="the dataset's format. dpo (default): prompt/chosen/rejected pairs for "
                            "DPOTrainer; kto: unpaired prompt/completion/label rows for KTOTrainer (the "
                            "consensus desirable, a student action that failed undesirable); sft: prompt + "
                            "the consensus for SFTTrainer. Each keeps `tools` and the provenance columns")
    group.add_argument("--swap-pairs", action="store_true",
                       help="a control, not for training a student you want: every pair's chosen and "
                            "rejected exchanged before the format is made (the student's action preferred to "
                            "the consensus); counted in report.json extra.swapped")
    group.add_argument("--license", metavar="ID",
                       help="the dataset card's license, a Hugging Face identifier (e.g. mit, cc-by-4.0; "
                            "default: unknown)")
    group.add_argument("--push-to-hub", metavar="REPO", help="also push the dataset to the Hugging Face Hub")
    group.add_argument("--view", action="store_true",
                       help="also write OUT/view/: static HTML pages of the states, answers and pairs "
                            "(the same as python -m replay.view OUT)")


def when(end: bool) -> Callable[[str], datetime]:
    """`--since` / `--until`: an instant (ingestion.scope.parse_when), one line and exit 2 when it is none."""
    def parse(text: str) -> datetime:
        from ingestion.scope import parse_when

        try:
            return parse_when(text, datetime.now().astimezone(), end=end)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return parse


def _scope(args: argparse.Namespace, sources: list[Path]) -> Scope | None:
    """The filters of what is read, None without any; --since not before --until is an error."""
    if not (args.project or args.exclude_project or args.since or args.until):
        return None
    if args.since and args.until and args.since >= args.until:
        raise ReplayError(f"--since {args.since.isoformat(timespec='minutes')} is not before --until "
                          f"{args.until.isoformat(timespec='minutes')}: no turn can be in between")
    return Scope(projects=args.project, exclude_projects=args.exclude_project, since=args.since,
                 until=args.until, roots=sources)


def trace_parallel(text: str) -> int | None:
    """`--trace-parallel`, `--ingest-workers`: a count of at least 1, or `auto` (None)."""
    if text.strip().lower() == "auto":
        return None
    return at_least(1)(text)


def config_from_args(args: argparse.Namespace, argv: list[str]) -> RunConfig:
    if not args.teachers and not args.dry_run:
        raise ReplayError("no teachers: pass --teachers (e.g. --teachers gpt-5,deepseek), or --dry-run "
                          "to only ingest")
    if args.consensus == "weighted" and args.early_stop:
        raise ReplayError("--consensus weighted weighs every teacher's answer at every state; it cannot be "
                          "combined with --early-stop (which skips answers by the majority rule)")
    if args.batch and args.early_stop:
        raise ReplayError("--batch asks every teacher at once; it cannot be combined with --early-stop")
    pool = None
    if args.teachers:
        pool = PoolOptions(teachers=args.teachers, cache=args.cache, concurrency=args.concurrency,
                           per_teacher=args.per_teacher, samples=args.samples, timeout=args.timeout,
                           max_cost=args.max_cost, allow_same_family=args.allow_same_family,
                           redact=not args.no_redact, batch=args.batch, batch_poll=args.batch_poll,
                           max_response_bytes=int(args.max_response_mb * 1_000_000),
                           trace_parallel=args.trace_parallel)
    from ingestion.sources import split_sources

    sources = split_sources(args.source)
    return RunConfig(
        source=sources[0] if len(sources) == 1 else sources, out=args.out, dry_run=args.dry_run, pool=pool,
        redact=not args.no_redact, pseudonymise=not args.no_pseudonymise, names=not args.no_names,
        force=args.force,
        max_failed=args.max_failed, select=args.select,
        ingest=IngestOptions(include_subagents=args.include_subagents, max_states=args.max_states,
                             max_message_chars=args.max_message_chars,
                             max_prompt_tokens=args.max_prompt_tokens, max_length=args.max_length,
                             tokenizer=args.tokenizer or args.preflight_tokenizer,
                             workers=args.ingest_workers, scope=_scope(args, sources)),
        consensus=ConsensusOptions(method=args.consensus, min_agreement=args.min_agreement,
                                   judge=args.judge, early_stop=args.early_stop, match=args.match),
        export=_export_options(args),
        command=shlex.join(["python", "-m", "replay.run", *argv]))


def _export_options(args: argparse.Namespace) -> ExportOptions:
    templates = [name for name in map(str.strip, args.preflight_template.split(",")) if name]
    return ExportOptions(preflight_tokenizer=args.preflight_tokenizer, max_length=args.max_length,
                         push_to_hub=args.push_to_hub, tokenizer=args.tokenizer or args.preflight_tokenizer,
                         preflight_templates=templates,
                         test_split=args.test_split, license=args.license, format=args.format,
                         swap_pairs=args.swap_pairs)


def _lacking(specs: Sequence[TeacherSpec]) -> dict[str, list[str]]:
    """Each teacher's API keys not set in the environment (none for endpoints of our own); `specs` is
    the pool the run parsed, not parsed again."""
    from teachers.client import missing_keys

    return {spec.name: keys for spec in specs if (keys := missing_keys(spec))}


def _python() -> str:
    from replay.next_step import python_command

    return python_command(sys.executable, sys.prefix, sys.base_prefix, os.getcwd())


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    from replay.next_step import next_step_lines
    from replay.pipeline import RunFailed, run
    from replay.summary import print_summary
    from teachers.cache import CacheError

    specs: list[TeacherSpec] = []
    try:
        config = config_from_args(args, argv)
        if config.pool is not None:
            from teachers.registry import parse_pool

            specs = parse_pool(config.pool.teachers)  # once: the run and the next step share it
        with stop_signals():
            report = run(config, specs=specs if config.pool is not None else None)
    except (KeyboardInterrupt, BaseExceptionGroup) as caught:    # Interrupted is a KeyboardInterrupt
        if (code := interrupted_exit(caught, kept(args.out))) is None:
            raise
        return code
    except ReplayError as error:
        # imported here: teachers.probe loads asyncio, which a dry run never needs
        from teachers.probe import AllUnreachable
        from teachers.scrub import scrub

        print(f"error: {scrub(str(error))}", file=sys.stderr)
        return 1 if isinstance(error, CacheError | RunFailed | AllUnreachable) else 2
    print_summary(report, str(args.out))
    if report.dry_run and not args.view:
        print("\n".join(next_step_lines(argv, str(args.out), report.states, args.teachers,
                                         _lacking(specs), _python())))
    if args.view:
        from replay.view.cli import main as view_main

        return view_main([str(args.out)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
