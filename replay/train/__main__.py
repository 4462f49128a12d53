"""`python -m replay.train {dpo,kto,sft} --dataset OUT --model STUDENT ...`: the training examples' command
(`examples/train_*.py`) from the installed package, for callers without the examples folder (`replay.loop`
runs it as a stage)."""

import sys

from replay.train.cli import main
from replay.train.trainers import TRAINERS

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in TRAINERS:
        sys.exit(f"usage: python -m replay.train {{{','.join(TRAINERS)}}} --dataset OUT --model STUDENT ... "
                 f"(--help after the format for the flags)")
    main(sys.argv[1], sys.argv[2:])
