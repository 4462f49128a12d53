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
    """The figures as tables: one line per yardstick, before → after; then TRL's own eval."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:  # piped or redirected: whole rows, not rich's default 80 columns
            console.width = 200
    table = Table(title=f"{report.trainer} on {report.rows.get('train', 0)} rows, {report.steps} steps → "
                        f"{report.output}", box=box.SIMPLE_HEAD,
                  caption="accuracy: share of pairs whose log-odds of chosen over rejected rose above the "
                          "untrained student's (TRL's rewards/accuracies; untrained = 0, every pair a tie); "
                          "margin: the mean rise, nats; likelihood: share the student itself gives chosen "
                          "the higher log-likelihood (favours the shorter answer); [95% Wilson interval]")
    for column in ("yardstick", "pairs", "accuracy before", "accuracy after", "margin after",
                   "likelihood before", "likelihood after"):
        table.add_column(column, justify="left" if column == "yardstick" else "right", no_wrap=True)
    for name, after in report.after.yardsticks.items():
        before = report.before.yardsticks.get(name, Figures())
        table.add_row(name, str(after.pairs), _share(before.accuracy, before.interval),
                      _share(after.accuracy, after.interval), _share(after.margin),
                      _share(before.likelihood_accuracy, before.likelihood_interval),
                      _share(after.likelihood_accuracy, after.likelihood_interval))
    if report.after.yardsticks:
        console.print(table)
    keys = [key for key in TRL_KEYS if key in report.after.trl]
    if keys:
        trl = Table(title=f"TRL's own eval on the test split ({report.rows.get('test', 0)} rows)",
                    box=box.SIMPLE_HEAD)
        for column in ("metric", "before", "after"):
            trl.add_column(column, justify="left" if column == "metric" else "right")
        for key in keys:
            trl.add_row(key, _share(report.before.trl.get(key)), _share(report.after.trl.get(key)))
        console.print(trl)
    console.print(f"figures: {Path(report.output) / REPORT_FILE}")
    for note in report.notes:
        console.print(f"note: {note}")
