"""`python -m replay.ablate`: what other teacher pools would have made of a finished run.

Recomputes consensus and pairs for each pool from the answers the run already has (no calls unless
`--allow-calls`), writes one dataset per pool, `ablation.csv`, `ablation.md`, `agreement.csv` and
`ablation.png`; and judges the teachers: hindsight agreement per pool, each teacher's reliability
(Dawid–Skene) and Shapley share, the cost frontier, the asking order for `--early-stop`
(`teachers.csv`, `teachers.md`, `frontier.png`, `ablation.json`). With `--train`, each pool is also
judged by the student it trains (replay.ablation.training).
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
    student = parser.add_argument_group(
        "judging each pool by the student it trains (--train; needs a run made with --test-split)")
    student.add_argument("--train", action="store_true",
                         help="train one student per pool (the --pools named, else the frontier's) with "
                              "DPO on the pool's train split, same settings and seed, and judge each on the "
                              "run's held-out traces: the recovery set and the full pool's held-out pairs; "
                              "adds the students' figures to the table and the frontier")
    student.add_argument("--student-model", metavar="PATH_OR_NAME",
                         help="the student to train: a local folder or a Hub name (its tokenizer's chat "
                              "template renders the rows); on CPU name a small model")
    student.add_argument("--train-epochs", type=float, default=1.0, metavar="F", help="passes over each "
                         "pool's train split (1)")
    student.add_argument("--train-steps", type=int, default=-1, metavar="N",
                         help="stop each student after N steps instead")
    student.add_argument("--learning-rate", type=float, default=None, metavar="LR",
                         help="DPO's learning rate (1e-5, for LoRA on a real student)")
    student.add_argument("--lora-r", type=int, default=16, metavar="R",
                         help="LoRA rank (0: full fine-tuning)")
    student.add_argument("--batch-size", type=int, default=2, metavar="N", help="per device (2)")
    student.add_argument("--cpu", action="store_true", help="train on the CPU in float32 (also without CUDA)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.train and not args.student_model:
        parser.error("--train needs --student-model (the student to train, e.g. a local folder)")
    from ingestion.schema import ReplayError
    from replay.ablation.load import AblateConfig, TrainSettings
    from replay.ablation.run import ablate
    from replay.ablation.summary import print_summary
    from replay.signals import interrupted_exit, stop_signals

    config = AblateConfig(run=args.run, pools=args.pools, all_subsets=args.all_subsets,
                          leave_one_out=args.leave_one_out, out=args.out, allow_calls=args.allow_calls,
                          allow_missing=args.allow_missing, consensus=args.consensus,
                          min_agreement=args.min_agreement, recommend=args.recommend,
                          permutations=args.permutations,
                          train=TrainSettings(model=args.student_model, epochs=args.train_epochs,
                                              max_steps=args.train_steps, learning_rate=args.learning_rate,
                                              lora_r=args.lora_r, batch_size=args.batch_size, cpu=args.cpu)
                          if args.train else None,
                          command=shlex.join(["python", "-m", "replay.ablate", *argv]))
    try:
        with stop_signals():
            result = ablate(config)
    except (KeyboardInterrupt, BaseExceptionGroup) as caught:    # Interrupted is a KeyboardInterrupt
        # Pools are written one after another, the tables last: OUT may hold some pools' new datasets.
        what = (f"every answer received is in the cache; {config.out_dir} may be part-written: run the same "
                "command again to write it whole")
        if (code := interrupted_exit(caught, what)) is None:
            raise
        return code
    except ReplayError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print_summary(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
