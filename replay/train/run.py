"""`train`: one student trained on one dataset with TRL, judged on held-out data before and after.

Order: load the rows and build the yardsticks (`heldout`) → score every yardstick with the untrained
student (`scoring`; its log-likelihoods are the reference of every later figure) → the trainer
(`trainers`) → TRL's own eval on the test split → train → TRL's eval again → score with the trained
student → save the adapter and `held_out.json` beside it (`report`). Without a test split it trains
and says it judged nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ingestion.schema import ReplayError
from replay.signals import deferred
from replay.train.data import Rows, TrainOptions, load_rows
from replay.train.figures import Figures, PairScores, figures
from replay.train.heldout import RECOVERY, Pair, yardsticks
from replay.train.report import REPORT_FILE, TrainReport, print_report, write_report
from replay.train.scoring import score_pairs
from replay.train.trainers import TRAINERS, build_trainer, load_student

# The note on an interrupt that came after the adapter was saved (replay.train.cli says so).
ADAPTER_SAVED = "replay.train: the adapter was saved"

KTO_LOSS = ("KTO's training loss is no learning curve: for a desirable row it is 1 - sigmoid(beta * "
            "(r - z)), z the batch's estimate of the KL term from its neighbours' completions; where "
            "training raises a completion under every prompt, z rises with r and the loss stays near 0.5 "
            "while the student moves. Read the held-out figures.")
NO_TEST = ("the dataset has no test split, so nothing held out was judged: make it with "
           "`replay.run --test-split 0.2`")


class TrainError(ReplayError):
    """Nothing to train on: one line, exit 1 (replay.train.cli)."""


Scores = tuple[list[tuple[float, float] | None], int]


def train(options: TrainOptions, sticks: Mapping[str, Sequence[Pair]] | None = None, console: Any = None,
          quiet: bool = False) -> TrainReport:
    """Train, save, judge; returns the report (also written to `options.output/held_out.json`).
    `sticks` (name → DPO pairs) replaces the yardsticks of the dataset's own test split."""
    from transformers import set_seed

    set_seed(options.seed)
    rows = load_rows(options)
    report = TrainReport(format=options.format, trainer=TRAINERS[options.format], model=options.model,
                         dataset=str(options.dataset), output=str(options.output),
                         rows={"train": rows.train.num_rows, "test": rows.test.num_rows if rows.test else 0},
                         settings=options.model_dump(mode="json") | {"max_length": rows.max_length})
    chosen = _yardsticks(options, rows, sticks, report)
    if options.format == "kto":
        report.notes.append(KTO_LOSS)
    model, tokenizer = load_student(options)
    untrained = {name: _score(model, tokenizer, pairs, rows, options) for name, pairs in chosen.items()}
    report.before.yardsticks = {name: _figures(got, got) for name, got in untrained.items()}
    trainer = build_trainer(options, model, tokenizer, rows.train,
                            rows.test if options.evaluate else None, rows.max_length)
    if len(trainer.train_dataset) == 0:  # TRL drops a row whose prompt alone fills max_length
        raise TrainError(f"no row of the train split fits max_length {rows.max_length} tokens of "
                         f"{options.model}'s tokenizer ({rows.train.num_rows} dropped): make the run with "
                         f"`replay.run --max-length N` (its states are then fitted to N), or pass a larger "
                         f"--max-length")
    if trainer.eval_dataset is not None:
        report.before.trl = _numbers(trainer.evaluate())
    output = trainer.train()
    saved = False
    try:
        with deferred():   # a Ctrl-C while saving lands after the save: the adapter is whole or untouched
            trainer.save_model(str(options.output))
            (options.output / REPORT_FILE).unlink(missing_ok=True)   # an earlier adapter's figures
            saved = True
        report.steps = trainer.state.global_step
        report.losses = [round(log["loss"], 4) for log in trainer.state.log_history if "loss" in log]
        report.settings["train_loss"] = round(output.training_loss, 4)
        if trainer.eval_dataset is not None:
            report.after.trl = _numbers(trainer.evaluate())
        report.after.yardsticks = {name: _figures(_score(trainer.model, tokenizer, pairs, rows, options),
                                                  untrained[name]) for name, pairs in chosen.items()}
        write_report(report, options.output)
    except KeyboardInterrupt as stop:
        if saved:
            stop.add_note(ADAPTER_SAVED)
        raise
    if not quiet:
        print_report(report, console)
    return report


def _yardsticks(options: TrainOptions, rows: Rows, given: Mapping[str, Sequence[Pair]] | None,
                report: TrainReport) -> dict[str, list[Pair]]:
    if not options.evaluate:
        return {}
    if given is not None:
        return {name: list(pairs) for name, pairs in given.items()}
    if rows.test is None:
        report.notes.append(NO_TEST)
        return {}
    found = yardsticks(rows.run, rows.test.to_list())
    if rows.run is None:
        report.notes.append("no states.jsonl beside the dataset, so no recovery set: give the run folder")
    elif not found[RECOVERY]:
        report.notes.append("no failed state of the held-out traces has a recovery: the recovery set is "
                            "empty")
    return found


def _score(model: Any, tokenizer: Any, pairs: list[Pair], rows: Rows, options: TrainOptions) -> Scores:
    model.eval()
    batch = options.eval_batch_size or options.batch_size
    return score_pairs(model, tokenizer, pairs, rows.max_length, batch)


def _figures(policy: Scores, reference: Scores) -> Figures:
    """Pairs scored under both models; the untrained student is its own reference (every margin 0)."""
    scores = [PairScores(chosen=p[0], rejected=p[1], ref_chosen=r[0], ref_rejected=r[1])
              for p, r in zip(policy[0], reference[0], strict=True) if p is not None and r is not None]
    return figures(scores, {"too_long": policy[1]} if policy[1] else {})


def _numbers(metrics: dict[str, Any]) -> dict[str, float]:
    """TRL's eval metrics without the timing ones."""
    return {key: round(float(value), 6) for key, value in metrics.items()
            if isinstance(value, int | float) and "runtime" not in key and "per_second" not in key}
