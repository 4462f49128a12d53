"""The table `replay.ablate` ends with."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from replay.ablation.result import Ablation


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def print_summary(ablation: Ablation, console: Console | None = None) -> None:
    if console is None:
        console = Console()
        if not console.is_terminal:  # piped or redirected: whole rows, not rich's default 80 columns
            console.width = 200
    table = Table(title=f"teacher-pool ablation → {ablation.out}", box=box.SIMPLE_HEAD,
                  caption="* the run's own pool; rates over the states voted on (agree: over consensus); "
                          "hindsight: consensus = the student's recovery, intent tier, over failed states")
    table.add_column("pool", no_wrap=True)
    for column in ("voted", "consensus", "abstain", "agree", "pairs", "USD", "Jaccard", "exact/intent",
                   "hindsight"):
        table.add_column(column, justify="right", no_wrap=True)
    for number, row in enumerate(ablation.rows):
        table.add_row(row.pool + (" *" if number == 0 else ""), str(row.voted),
                      f"{100 * row.consensus_rate:.1f}%", f"{100 * row.abstain_rate:.1f}%",
                      f"{100 * row.agree_rate:.1f}%", str(row.pairs), f"{row.cost_usd:.4f}",
                      "n/a" if row.jaccard is None else f"{row.jaccard:.2f}",
                      f"{row.reached_exact}/{row.reached_intent}",
                      _percent(row.hindsight.intent_rate))
    console.print(table)
    calls = ablation.calls
    if any(calls.values()):
        console.print(f"calls made {calls['made']} · cached {calls['cached']} · failed {calls['failed']}")
    if ablation.missing:
        console.print(f"[yellow]{ablation.missing} skipped early-stop answers counted as no vote[/yellow]")
    if ablation.training is not None:
        print_students(ablation, console)
    quality = ablation.quality
    if quality is not None and quality.recommended:
        console.print(f"recommended: {quality.recommended} ({quality.recommend_why})")
    console.print(f"tables: {ablation.out / 'ablation.md'} · plot: {ablation.out / 'ablation.png'} · "
                  f"teachers: {ablation.out / 'teachers.md'} · frontier: {ablation.out / 'frontier.png'}")


def print_students(ablation: Ablation, console: Console) -> None:
    """--train: the trained students, best first, and what decided the order."""
    from replay.ablation.students import HEADER, student_cells

    training = ablation.training
    assert training is not None
    table = Table(title=f"judged by the trained student ({training.settings.model})", box=box.SIMPLE_HEAD,
                  caption=f"{training.held_out_traces} held-out traces; accuracy: share of pairs whose "
                          "log-odds of chosen over rejected rose above the untrained student's (0.00: every "
                          "pair a tie) [95% Wilson]; ranking: " + training.ranking)
    for column in HEADER:
        table.add_column(column, justify="left" if column in ("pool", "decided by") else "right")
    for student in training.students:
        table.add_row(*student_cells(student))
    console.print(table)
