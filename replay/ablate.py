"""`python -m replay.ablate`: what other teacher pools would have made of a finished run.

Recomputes consensus and pairs for each pool from the answers the run already has (no calls unless
`--allow-calls`), writes one dataset per pool, `ablation.csv`, `ablation.md`, `agreement.csv` and
`ablation.png`; and judges the teachers: hindsight agreement per pool, each teacher's reliability
(Dawid–Skene) and Shapley share, the cost frontier, the asking order for `--early-stop`
(`teachers.csv`, `teachers.md`, `frontier.png`, `ablation.json`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from replay.flags import at_least, fraction


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m replay.ablate",
        description="Recompute consensus and DPO pairs of a finished `replay.run` for other teacher pools, "
                    "from the answers it already has; one dataset per pool, a table and a plot.",
        epilog='example: python -m replay.ablate --run replay-out --pools "gpt-5,deepseek;gpt-5;deepseek"')
    parser.add_argument("--run", type=Path, required=True, metavar="DIR",
                        help="the --out folder of a finished replay.run (run.json, states.jsonl, "
                             "proposals.jsonl)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--pools", metavar="POOLS",
                       help='pools separated by ";", teachers by ",": the run\'s teacher names (aliases, or '
                            'the name of name=model@url); the full pool is always computed too')
    which.add_argument("--all-subsets", action="store_true",
                       help="every non-empty subset of the run's teachers (at most 8 teachers)")
    which.add_argument("--leave-one-out", action="store_true",
                       help="the full pool and the pool without each teacher in turn")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR2",
                        help="output folder (default: DIR/ablation); a pool's dataset goes to "
                             "DIR2/<pool>/dataset")
    parser.add_argument("--allow-calls", action="store_true",
                        help="ask what the run lacks through its cache: teachers new to the run "
                             "(any --teachers entry), answers an --early-stop run skipped, judge calls")
    parser.add_argument("--allow-missing", action="store_true",
                        help="count answers an --early-stop run skipped as no vote instead of failing "
                             "(biased against the teachers it asked last)")
    parser.add_argument("--consensus", choices=["vote", "similarity", "weighted", "judge"], default=None,
                        help="decide every pool with this method (default: the run's); weighted: each "
                             "teacher's vote weighs its reliability, estimated from the run's answers "
                             "(Dawid-Skene over intent keys)")
    parser.add_argument("--min-agreement", type=fraction(upper_open=True), default=None, metavar="F",
                        help="the winning group must hold more than this share of the votes (weighted: "
                             "of the weight); default: the run's")
    parser.add_argument("--recommend", type=fraction(upper_open=True), nargs="?", const=0.02, default=None,
                        metavar="MARGIN",
                        help="name the cheapest pool whose hindsight agreement is within MARGIN (0.02 = 2 "
                             "points) of the best pool's (without hindsight figures: within MARGIN of the "
                             "most pairs)")
    parser.add_argument("--permutations", type=at_least(2), default=200, metavar="N",
                        help="beyond 8 teachers, Shapley values from N seeded random orders, with their "
                             "standard error (200); up to 8 they are exact")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    from ingestion.schema import ReplayError
    from replay.ablation.load import AblateConfig
    from replay.ablation.run import ablate
    from replay.ablation.summary import print_summary

    config = AblateConfig(run=args.run, pools=args.pools, all_subsets=args.all_subsets,
                          leave_one_out=args.leave_one_out, out=args.out, allow_calls=args.allow_calls,
                          allow_missing=args.allow_missing, consensus=args.consensus,
                          min_agreement=args.min_agreement, recommend=args.recommend,
                          permutations=args.permutations,
                          command=shlex.join(["python", "-m", "replay.ablate", *argv]))
    try:
        result = ablate(config)
    except ReplayError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print_summary(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
