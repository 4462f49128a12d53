"""`python -m replay.train {dpo,kto,sft} --dataset OUT --model STUDENT ...`: the training examples' command
(`examples/train_*.py`) from the installed package, for callers without the examples folder (`replay.loop`
runs it as a stage)."""

import sys

from replay.train.cli import main
from replay.train.trainers import TRAINERS

USAGE = (f"usage: python -m replay.train {{{','.join(TRAINERS)}}} --dataset OUT --model STUDENT ...\n\n"
         "Train the student on a replay.run dataset with TRL (the format's trainer) and LoRA; the flags are "
         "examples/train_FORMAT.py's (`python -m replay.train dpo --help`).\n")

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in TRAINERS:
        asked = len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help")
        print(USAGE, file=sys.stdout if asked else sys.stderr, end="")
        sys.exit(0 if asked else 2)
    main(sys.argv[1], sys.argv[2:])
