"""`python -m replay.eval`: judge data by the student — ask any model at a run's held-out states as its
teachers were asked, and score every answer against the run (the consensus, the student's own action and
recovery, a valid call), each rate with a 95% interval over held-out traces. Writes OUT/eval/.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from replay.flags import usd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m replay.eval",
        description="Ask models at a finished run's held-out states exactly as its teachers were asked "
                    "(same prompt, tools, cache, pacing, redaction) and score each answer against the run: "
                    "agreement with the teachers' consensus (exact / intent), repeats of the student's "
                    "action, the student's recovery at failed states, valid calls. Each rate with its n "
                    "and a 95% bootstrap interval over traces (under 20 held-out traces a cluster t interval "
                    "and a warning that the intervals are unreliable); paired differences between models. "
                    "Writes DIR/eval/ (eval.json, eval.md, eval.png, answers.jsonl).",
        epilog="example: python -m replay.eval --run OUT --models "
               "base=openai/Qwen/Qwen3-8B@http://localhost:8000/v1,tuned=openai/tuned@http://localhost:8000/v1")
    parser.add_argument("--run", type=Path, required=True, metavar="DIR",
                        help="the --out folder of a finished replay.run (run.json, states.jsonl, "
                             "verdicts.jsonl)")
    parser.add_argument("--models", required=True, metavar="NAME=MODEL,...",
                        help="the models to evaluate, as --teachers takes them: an alias, a litellm model "
                             "string, or name=openai/<model>@http://host:port/v1 (a vLLM server: the base "
                             "student, or an adapter served with --enable-lora); optional #price=IN/OUT")
    parser.add_argument("--states", default="auto", metavar="WHICH",
                        help="the held-out states: auto (default: test if the dataset has a test split, "
                             "else sample), test (the traces of the --test-split test split), "
                             "sample[:SHARE] (a seeded sample of whole traces, SHARE of the states, 0.2), "
                             "all, or a file of state or trace ids, one a line")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the trace sample and of the bootstrap (0)")
    parser.add_argument("--max-cost", type=usd, default=None, metavar="USD",
                        help="stop new calls at this many USD (answers in the cache cost nothing)")
    parser.add_argument("--max-tokens", type=int, default=None, metavar="N",
                        help="cap every model's reply at N tokens (default: as the run asked its teachers; a "
                             "served student that answers in prose otherwise writes to its server's default)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the held-out states, calls and USD it would take; ask nothing, write "
                             "nothing")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    from ingestion.schema import ReplayError
    from replay.evaluation.run import EvalConfig, EvalFailed, evaluate, plan
    from replay.evaluation.summary import plan_lines, summary_lines
    from replay.signals import interrupted_exit, kept, stop_signals
    from teachers.cache import CacheError
    from teachers.probe import AllUnreachable

    config = EvalConfig(run=args.run, models=args.models, states=args.states, seed=args.seed,
                        max_cost=args.max_cost, max_tokens=args.max_tokens,
                        command=shlex.join(["python", "-m", "replay.eval", *argv]))
    try:
        if args.dry_run:
            print("\n".join(plan_lines(plan(config))))
            return 0
        with stop_signals():
            evaluation = evaluate(config)
    except (KeyboardInterrupt, BaseExceptionGroup) as caught:    # Interrupted is a KeyboardInterrupt
        if (code := interrupted_exit(caught, kept(config.out_dir))) is None:
            raise
        return code
    except ReplayError as error:
        from teachers.scrub import scrub

        print(f"error: {scrub(str(error))}", file=sys.stderr)
        return 1 if isinstance(error, CacheError | AllUnreachable | EvalFailed) else 2
    print("\n".join(summary_lines(evaluation, config.out_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
