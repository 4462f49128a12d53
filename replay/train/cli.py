"""The command line the training examples share (`examples/train_{dpo,kto,sft}.py`): flags → `TrainOptions`
→ `replay.train.run.train`, errors and Ctrl-C as one line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from replay.train.data import TrainOptions
from replay.train.trainers import TRAINERS


def build_parser(fmt: str) -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(
        prog=f"python examples/train_{fmt}.py",
        description=f"Train the student with TRL's {TRAINERS[fmt]} and LoRA on a `replay.run --format {fmt}` "
                    "dataset, on the student's own chat template. With a test split (`replay.run "
                    "--test-split`), judge it on held-out pairs and on the recovery set before and after "
                    "training; the figures are printed and saved beside the adapter (held_out.json).")
    out.add_argument("--dataset", type=Path, required=True,
                     help="the replay.run --out folder (or its dataset/ folder: then no recovery set)")
    out.add_argument("--model", required=True,
                     help="the student: a Hub name or a local folder (its tokenizer and chat template are "
                          "used as they are)")
    out.add_argument("--adapter", type=Path, default=None, metavar="DIR",
                     help="go on training this LoRA adapter of --model (the reference is the model with the "
                          "adapter as it was: the round before, as replay.loop runs it)")
    out.add_argument("--output", type=Path, default=Path(f"{fmt}-lora"),
                     help="where the adapter and held_out.json are saved")
    out.add_argument("--max-steps", type=int, default=-1, help="stop after N steps (default: --epochs)")
    out.add_argument("--epochs", type=float, default=1.0, help="passes over the train split (1)")
    out.add_argument("--max-length", type=int, default=None,
                     help="tokens per sequence (default: the dataset card's, else 8192)")
    out.add_argument("--batch-size", type=int, default=2, help="per device (KTO needs more than 1)")
    out.add_argument("--learning-rate", type=float, default=None,
                     help="default for LoRA on a real student: DPO 1e-5, KTO 4e-5 (KTO moves the "
                          "student about a quarter as far per step), SFT 1e-4")
    if fmt != "sft":
        out.add_argument("--beta", type=float, default=0.1, help="TRL's beta (0.1)")
    out.add_argument("--lora-r", type=int, default=16, help="LoRA rank (0: full fine-tuning)")
    out.add_argument("--template", metavar="NAME", default=None,
                     help="keep only the rows this --preflight-template renders cleanly")
    out.add_argument("--seed", type=int, default=0, help="the seed of the trainer and the data order (0)")
    out.add_argument("--no-eval", action="store_true", help="train only: judge nothing held out")
    out.add_argument("--cpu", action="store_true", help="train on the CPU in float32 (also without CUDA)")
    return out


def main(fmt: str, argv: list[str] | None = None) -> object:
    """Parse, train, print; exits with one line on a mistake a user can make. Returns the report."""
    from ingestion.schema import ReplayError
    from replay.signals import interrupted_exit, stop_signals
    from replay.train.run import ADAPTER_SAVED, train

    parser = build_parser(fmt)
    args = parser.parse_args(argv)
    if fmt == "kto" and args.batch_size < 2:   # TRL says so only once the model is loaded
        parser.error("--batch-size: KTO needs 2 or more (TRL estimates its KL term from the other rows of a "
                     "batch)")
    options = TrainOptions(dataset=args.dataset, model=args.model, adapter=args.adapter, format=fmt,
                           output=args.output,
                           max_steps=args.max_steps, epochs=args.epochs, max_length=args.max_length,
                           batch_size=args.batch_size, learning_rate=args.learning_rate,
                           beta=getattr(args, "beta", 0.1), lora_r=args.lora_r, template=args.template,
                           cpu=args.cpu, seed=args.seed, evaluate=not args.no_eval)
    try:
        with stop_signals():
            return train(options)
    except KeyboardInterrupt as caught:   # SIGINT, or SIGTERM (replay.signals.Interrupted)
        # The trainer saves nothing on the way (save_strategy "no"): the adapter is saved once training
        # is done, held_out.json once it is judged (replay.train.run).
        if ADAPTER_SAVED in getattr(caught, "__notes__", ()):
            what = f"the adapter is saved in {options.output}; held_out.json is not (it was being judged)"
        else:
            what = f"training stopped before its end, nothing was saved; {options.output} is as it was"
        _close_bars()
        sys.exit(interrupted_exit(caught, what))
    except ReplayError as error:
        sys.exit(f"error: {error}")


def _close_bars() -> None:
    """The trainer's progress bars, ended before the line is printed: left open, a bar's line has no end
    (the line would follow it on the same line) and it is drawn again, after the line, at exit."""
    from tqdm import tqdm

    for bar in list(tqdm._instances):
        # A bar interrupted in its constructor (a Ctrl-C as training starts) may have drawn itself before
        # tqdm sets `last_print_t`, and its close then leaves the line open: it is ended here. (One
        # interrupted between that and `start_t`, its last line, is given the `start_t` close reads.)
        if hasattr(bar, "last_print_t") and not hasattr(bar, "start_t"):
            bar.start_t = bar.last_print_t
        drawn = not hasattr(bar, "last_print_t") and getattr(bar, "sp", None) is not None
        bar.close()
        if drawn:
            bar.fp.write("\n")
