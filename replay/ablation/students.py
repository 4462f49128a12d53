"""The trained students' tables (`replay.ablate --train`): ablation.csv's student columns, the
ablation.md section, and the lines the command prints. Pure."""

from __future__ import annotations

from typing import Any

from replay.ablation.training import Student, Training, first_gain
from replay.train.figures import Figures
from replay.train.heldout import HELD_OUT, RECOVERY

# --train: the pool's trained student on the shared held-out yardsticks (empty for pools not trained).
STUDENT_COLUMNS = ("student_rank", "student_recovery_pairs", "student_recovery_accuracy",
                   "student_recovery_low", "student_recovery_high", "student_recovery_margin",
                   "student_held_out_pairs", "student_held_out_accuracy", "student_held_out_low",
                   "student_held_out_high", "student_held_out_margin", "student_gain",
                   "student_gain_per_usd", "student_decided_by", "student")


def student_row(student: Student | None) -> dict[str, Any]:
    """A pool's student columns (empty when it trained none).

    >>> from replay.train.figures import Figures
    >>> s = Student(pool="a", rank=1, output="a/student", figures={RECOVERY: Figures(
    ...     pairs=4, accuracy=1.0, interval=(0.51, 1.0), margin=2.0)}, gain={RECOVERY: 1.0})
    >>> row = student_row(s); row["student_recovery_accuracy"], row["student_held_out_accuracy"]
    (1.0, '')
    """
    row: dict[str, Any] = {column: "" for column in STUDENT_COLUMNS}
    if student is None or student.skipped is not None:
        return row | {"student_decided_by": student.skipped if student else ""}
    for short, name in (("recovery", RECOVERY), ("held_out", HELD_OUT)):
        figures = student.figures.get(name)
        if figures is None or figures.accuracy is None:
            continue
        low, high = figures.interval or ("", "")
        row.update({f"student_{short}_pairs": figures.pairs, f"student_{short}_accuracy": figures.accuracy,
                    f"student_{short}_low": low, f"student_{short}_high": high,
                    f"student_{short}_margin": figures.margin})
    first = first_gain(student)
    return row | {"student_rank": student.rank, "student_gain": "" if first is None else first,
                  "student_gain_per_usd": "" if student.gain_per_usd is None else student.gain_per_usd,
                  "student_decided_by": student.decided_by or "", "student": student.output or ""}



def _share(figures: Figures | None) -> str:
    if figures is None or figures.accuracy is None:
        return "n/a"
    low, high = figures.interval or (0.0, 0.0)
    return f"{figures.accuracy:.2f} [{low:.2f}, {high:.2f}]"


def _margin(figures: Figures | None) -> str:
    return "n/a" if figures is None or figures.margin is None else f"{figures.margin:.3f}"


def _gain(student: Student) -> str:
    first = first_gain(student)
    return "n/a" if first is None else f"{first:+.2f}"


def student_cells(student: Student) -> list[str]:
    """One trained student's cells: rank, pool, rows, steps, both yardsticks, gain, gain/USD, why."""
    if student.skipped is not None:
        return ["-", student.pool, "0", "0", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a",
                f"not trained: {student.skipped}"]
    per_usd = "n/a" if student.gain_per_usd is None else f"{student.gain_per_usd:.4g}"
    return [str(student.rank), student.pool, str(student.train_rows), str(student.steps),
            _share(student.figures.get(RECOVERY)), _margin(student.figures.get(RECOVERY)),
            _share(student.figures.get(HELD_OUT)), _margin(student.figures.get(HELD_OUT)), _gain(student),
            per_usd, student.decided_by or ("best" if student.rank == 1 else "")]


HEADER = ["rank", "pool", "train pairs", "steps", "recovery accuracy [95%]", "recovery margin",
          "held-out accuracy [95%]", "held-out margin", "gain", "gain/USD", "decided by"]


def training_lines(training: Training) -> list[str]:
    """ablation.md's section on the trained students, how to read it included.

    >>> from replay.ablation.load import TrainSettings
    >>> t = Training(settings=TrainSettings(model="tiny"), max_length=4096, held_out_traces=2,
    ...              yardsticks={RECOVERY: 4, HELD_OUT: 6}, students=[Student(pool="a", skipped="no rows")])
    >>> "| - | a | 0 | 0 |" in "\\n".join(training_lines(t))
    True
    """
    s = training.settings
    length = f"{s.max_steps} steps" if s.max_steps > 0 else f"{s.epochs:g} epoch(s)"
    untrained = training.untrained
    lines = ["## Judged by the trained student (`--train`)", "",
             f"Each pool's student: `{s.model}` trained with DPO on the pool's `train` split, {length}, "
             f"learning rate {s.learning_rate if s.learning_rate is not None else 1e-5:g}, "
             f"{'LoRA r=' + str(s.lora_r) if s.lora_r > 0 else 'full fine-tuning'}, batch {s.batch_size}, "
             f"seed {s.seed}, max length {training.max_length} — the same for every pool. Judged on the "
             f"run's {training.held_out_traces} held-out traces, which no pool trains on: the **recovery "
             f"set** ({training.yardsticks.get(RECOVERY, 0)} pairs: failed states whose student "
             f"recovered, the recovery chosen over the failed action; from the traces, no teacher "
             f"labelled it) and the **full pool's held-out pairs** ({training.yardsticks.get(HELD_OUT, 0)}).",
             "", "| " + " | ".join(HEADER) + " |", "|" + "---:|" * 4 + "---:|" * 6 + "---|"]
    lines += ["| " + " | ".join(student_cells(student)) + " |" for student in training.students]
    rec, held = untrained.get(RECOVERY), untrained.get(HELD_OUT)
    like = " / ".join("n/a" if f is None or f.likelihood_accuracy is None else f"{f.likelihood_accuracy:.2f}"
                      for f in (rec, held))
    lines += ["", "- **accuracy**: the share of pairs where training raised the student's log-odds of the "
              "chosen answer over the rejected one (TRL's `rewards/accuracies`: log-likelihood ratio "
              "against the untrained student). The untrained student scores 0.00: every pair is a tie "
              "(policy = reference), which says nothing moved yet, not that it prefers the rejected "
              "answer. [95% Wilson interval].",
              "- **margin**: the mean of that change of log-odds, in nats (TRL's `rewards/margins` is "
              "beta times it).",
              f"- The untrained student's own likelihood prefers the chosen answer on {like} of the pairs "
              "(recovery / held-out): a sum over tokens, it favours the shorter answer.",
              "- **gain**: accuracy over the untrained student's (recovery set, else held-out pairs); "
              "**gain/USD**: per USD the pool's answers cost.",
              f"- **Ranking**: {training.ranking}; **decided by** names the first figure that differs "
              "from the pool ranked just above. A difference inside the intervals is within noise.", ""]
    return lines
