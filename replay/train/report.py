"""What a training run learned, as `OUTPUT/held_out.json` beside the adapter and as a printed table.

`before` and `after` hold, for the same held-out data: TRL's own eval of the format's trainer on the
test split (`trl`: DPO's `eval_rewards/accuracies` and `eval_rewards/margins`, KTO's, SFT's
`eval_loss`), and the figures of every yardstick (`replay.train.figures`; the same for every format).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from replay.rundir.files import write_text
from replay.train.figures import Figures

REPORT_FILE = "held_out.json"
# TRL's eval keys worth a column, by trainer; the JSON keeps them all.
TRL_KEYS = ("eval_loss", "eval_rewards/accuracies", "eval_rewards/margins", "eval_kl",
            "eval_mean_token_accuracy")
_ABOUT = {"held_out_pairs": "the test split's pairs: consensus chosen, the student's action rejected",
          "recovery_set": "held-out failed states: the student's recovery chosen, its failed action rejected"}


class Stage(BaseModel):
    trl: dict[str, float] = Field(default_factory=dict)
    yardsticks: dict[str, Figures] = Field(default_factory=dict)


class TrainReport(BaseModel):
    format: str
    trainer: str
    model: str
    dataset: str
    output: str
    rows: dict[str, int]                     # train, test
    steps: int = 0
    losses: list[float] = Field(default_factory=list)   # the training loss at every logged step
    settings: dict[str, Any] = Field(default_factory=dict)
    before: Stage = Field(default_factory=Stage)
    after: Stage = Field(default_factory=Stage)
    notes: list[str] = Field(default_factory=list)


def write_report(report: TrainReport, folder: Path) -> Path:
    path = folder / REPORT_FILE
    folder.mkdir(parents=True, exist_ok=True)
    write_text(path, report.model_dump_json(indent=2) + "\n")
    return path


def _share(value: float | None, interval: tuple[float, float] | None = None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")


def print_report(report: TrainReport, console: Any = None) -> None:
    """The figures as a table: one line per yardstick, before → after."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"{report.trainer} on {report.rows.get('train', 0)} rows, {report.steps} steps → "
                        f"{report.output}", box=box.SIMPLE_HEAD,
                  caption="accuracy: share of pairs whose log-odds of chosen over rejected rose above the "
                          "untrained student's (TRL's rewards/accuracies; untrained = 0, every pair a tie); "
                          "likelihood: share the student itself gives chosen the higher log-likelihood "
                          "(favours the shorter answer); [95% Wilson interval]")
    for column in ("yardstick", "pairs", "accuracy before", "accuracy after", "margin after (nats)",
                   "likelihood before", "likelihood after"):
        table.add_column(column, justify="left" if column == "yardstick" else "right")
    for name, after in report.after.yardsticks.items():
        before = report.before.yardsticks.get(name, Figures())
        table.add_row(name, str(after.pairs), _share(before.accuracy, before.interval),
                      _share(after.accuracy, after.interval), _share(after.margin),
                      _share(before.likelihood_accuracy, before.likelihood_interval),
                      _share(after.likelihood_accuracy, after.likelihood_interval))
    for key in TRL_KEYS:
        if key in report.after.trl:
            table.add_row(f"TRL {key}", str(report.rows.get("test", 0)),
                          _share(report.before.trl.get(key)), _share(report.after.trl.get(key)), "", "", "")
    console.print(table)
    for note in report.notes:
        console.print(f"note: {note}")
