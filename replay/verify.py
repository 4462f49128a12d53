"""`python -m replay.verify`: check a run's pairs by what happens next, in the rollouts' own environment.

For each pair whose state comes from a collected rollout: the state restored in a fresh container, the
consensus taken there and, apart, the student's own action, the same student going on, the swebench
harness grading; N samples each. Rows gain `value_chosen`, `value_rejected`, `verified`, `flipped` and
`verification`; report.json gains `verify`. See replay/verification/.

Exit codes: 0 done; 1 not one branch was graded (OUT as it was), or branches ran and none took a turn
though some were due one (every one at context_overflow, say; --allow-empty accepts it); 2 bad flags or
input, a student server that fails the start-up check, no docker engine (before any branch); 130 / 143
interrupted: every branch graded is kept in OUT/verify/branches.jsonl, OUT as it was otherwise; the same
command goes on.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

from replay.flags import at_least

# A branch may end without a student turn of its own: its action submitted, or no turn was left (--max-turns
# 0, a state at the end of its rollout's turns). Any other end at 0 turns is a turn that could not be taken.
NO_TURN_DUE = frozenset({"submitted", "max_turns"})


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m replay.verify",
        description="Check a run's pairs by what happens next: at each pair's state (from a collected "
                    "SWE-bench rollout) take the teachers' consensus and, apart, the student's own action, "
                    "let the same student go on, and let the swebench harness grade; N samples each. Rows "
                    "gain value_chosen, value_rejected, verified and flipped.",
        epilog="example: python -m replay.verify --run dpo/ --rollouts rollouts/ --instances verified.jsonl "
               "--samples 4")
    add = parser.add_argument
    add("--run", type=Path, required=True, metavar="OUT", help="the --out folder of a finished replay.run")
    add("--rollouts", type=Path, required=True, metavar="DIR",
        help="the --out folder of the collect.run whose rollouts the run read")
    add("--instances", type=Path, default=None, metavar="FILE",
        help="the SWE-bench rows the rollouts were collected from (the harness grades with them)")
    add("--samples", type=at_least(1), default=4, metavar="N",
        help="branches per action (default 4; with 1 nothing can be verified: see the margin in README)")
    add("--allow-empty", action="store_true",
        help="exit 0 even when branches ran and none took a turn though some were due one (e.g. every "
             "one at context_overflow; default: said, exit 1)")
    add("--max-turns", type=at_least(0), default=None, metavar="T",
        help="student turns after the action (default: what the rollout had left of its own --max-turns)")
    add("--ray", default=None, metavar="ADDRESS",
        help="run the branches as Ray tasks (auto, HOST:PORT, ray://HOST:PORT, or local), as collect.run")
    add("--ray-dashboard", action="store_true", help="with --ray local: start Ray's dashboard (127.0.0.1)")
    add("--workers", type=at_least(1), default=2, help="branches at once on this machine (default 2)")
    add("--verified-only", action="store_true",
        help="keep only the rows the environment confirmed (the run's own rows stay in OUT/verify/)")
    add("--dry-run", action="store_true",
        help="print how many branches, rollouts and student tokens it will take; start nothing")
    add("--student-url", default=None,
        help="the student's server (default: each rollout's own, as recorded in its header)")
    add("--api-key", default=os.environ.get("REPLAY_STUDENT_API_KEY", "EMPTY"),
        help="API key for the student server (default $REPLAY_STUDENT_API_KEY or EMPTY)")
    add("--command-timeout", type=at_least(1), default=120,
        help="seconds per tool call (as collect.run: 120)")
    add("--output-limit", type=at_least(200), default=20_000,
        help="bytes of one observation (as collect.run: 20000; replayed observations are compared with it)")
    add("--eval-timeout", type=at_least(1), default=1800, help="seconds for the harness (1800)")
    add("--mem-limit", default="8g", help="container memory limit (8g)")
    add("--cpus", type=float, default=2.0, help="container CPUs (2)")
    add("-q", "--quiet", action="store_true", help="no progress")
    return parser


def _raise_interrupt(signum: int, frame: object) -> None:
    for each in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(each, signal.SIG_IGN)    # the cleanup that follows is not cut short
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import logging

    from pydantic import ValidationError

    from collect.config import CollectError
    from ingestion.schema import ReplayError
    from replay.verification.run import VerifyFailed, VerifyOptions, verify

    logging.basicConfig(level=logging.WARNING, format="verify: %(message)s", stream=sys.stderr)
    try:
        options = VerifyOptions(run=args.run, rollouts=args.rollouts, instances=args.instances,
                                samples=args.samples, max_turns=args.max_turns, ray=args.ray,
                                ray_dashboard=args.ray_dashboard, workers=args.workers,
                                verified_only=args.verified_only, dry_run=args.dry_run,
                                student_url=args.student_url, api_key=args.api_key,
                                command_timeout=args.command_timeout, output_limit=args.output_limit,
                                eval_timeout=args.eval_timeout, mem_limit=args.mem_limit, cpus=args.cpus)
    except ValidationError as exc:
        error = exc.errors()[0]
        print(f"error: --{str(error['loc'][0]).replace('_', '-')}: {error['msg']}", file=sys.stderr)
        return 2
    for each in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(each, _raise_interrupt)
    try:
        summary = verify(options, _console(args.quiet))
    except KeyboardInterrupt:
        print(f"interrupted: every graded branch is kept in {args.run / 'verify'}; {args.run} is otherwise "
              "as it was; run the same command again to go on", file=sys.stderr)
        return 130
    except (ReplayError, CollectError) as error:
        from teachers.scrub import scrub

        print(f"error: {scrub(str(error))}", file=sys.stderr)
        return 1 if isinstance(error, VerifyFailed) else 2
    print(_describe(summary))
    if _empty(summary) and not args.allow_empty:
        ends = ", ".join(f"{n} {status}" for status, n in summary["exit_status"].items())
        print(f"error: no branch took a turn ({ends}; why per branch in verify/branches.jsonl); "
              "--allow-empty accepts it", file=sys.stderr)
        return 1
    return 0


def _empty(summary: dict[str, Any]) -> bool:
    """Branches ran, not one took a turn, and some ended for want of one (e.g. context_overflow: the
    student's first request after the action did not fit), not only because none was due.

    >>> _empty({"exit_status": {"context_overflow": 2}, "turns": 0})
    True
    >>> _empty({"exit_status": {"max_turns": 2}, "turns": 0}), _empty({"dry_run": True, "turns": 0})
    (False, False)
    """
    ends = set(summary.get("exit_status") or {})
    return not summary.get("dry_run") and summary.get("turns") == 0 and bool(ends - NO_TURN_DUE)


def _console(quiet: bool) -> Any:
    from rich.console import Console

    return Console(stderr=True, quiet=quiet)


def _describe(summary: dict[str, Any]) -> str:
    """The summary line for the terminal.

    >>> print(_describe({"dry_run": True, "pairs": 3, "checkable": 2, "branches": 8, "to_run": 8,
    ...     "rollouts": 2, "student_tokens": 1200, "student_tokens_max": 5000, "unverifiable_reasons":
    ...     {"no_environment": 1}}))
    3 pairs: 2 to check, 8 branches (8 to run) over 2 rollouts, ~1,200 student tokens (at most 5,000); \
unverifiable: no_environment 1
    >>> print(_describe({"pairs": 3, "verified": 1, "flipped": 1, "tied": 0, "unverifiable": 1,
    ...     "restore_mismatches": 0, "rollouts": 2, "student_tokens": 900, "usd": 0.0, "rows": 3,
    ...     "branches": {"run": 8, "resumed": 0, "failed": {}}, "unverifiable_reasons": {"x": 1}}))
    3 pairs: 1 verified, 1 flipped, 0 tied, 1 unverifiable (x 1); 8 branches run, 0 resumed, \
0 restore mismatches, 900 student tokens, 0.0000 USD; 3 rows
    >>> print(_describe({"pairs": 1, "verified": 0, "flipped": 0, "tied": 0, "unverifiable": 1,
    ...     "restore_mismatches": 0, "rollouts": 1, "student_tokens": 0, "usd": 0.0, "rows": 1, "turns": 0,
    ...     "exit_status": {"context_overflow": 2}, "branches": {"run": 2, "resumed": 0, "failed": {}}}))
    1 pairs: 0 verified, 0 flipped, 0 tied, 1 unverifiable; 2 branches run, 0 resumed (ended: \
2 context_overflow), 0 restore mismatches, 0 student tokens, 0.0000 USD; 1 rows; NO TURNS taken
    """
    reasons = ", ".join(f"{k} {v}" for k, v in (summary.get("unverifiable_reasons") or {}).items())
    if summary.get("dry_run"):
        text = (f"{summary['pairs']} pairs: {summary['checkable']} to check, {summary['branches']} branches "
                f"({summary['to_run']} to run) over {summary['rollouts']} rollouts, "
                f"~{summary['student_tokens']:,} student tokens (at most {summary['student_tokens_max']:,})")
        return text + (f"; unverifiable: {reasons}" if reasons else "")
    branches = summary["branches"]
    failed = ", ".join(f"{k} {v}" for k, v in branches["failed"].items())
    ended = ", ".join(f"{v} {k}" for k, v in sorted((summary.get("exit_status") or {}).items(),
                                                       key=lambda item: (-item[1], item[0])))
    return (f"{summary['pairs']} pairs: {summary['verified']} verified, {summary['flipped']} flipped, "
            f"{summary['tied']} tied, {summary['unverifiable']} unverifiable"
            + (f" ({reasons})" if reasons else "")
            + f"; {branches['run']} branches run, {branches['resumed']} resumed"
            + (f" (ended: {ended})" if ended else "")
            + (f" ({failed} failed)" if failed else "")
            + f", {summary['restore_mismatches']} restore mismatches, {summary['student_tokens']:,} student "
            f"tokens, {summary['usd']:.4f} USD; {summary['rows']} rows"
            + ("; NO TURNS taken" if _empty(summary) else ""))


if __name__ == "__main__":
    sys.exit(main())
