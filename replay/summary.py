"""The short table a run ends with."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from replay.report import Report


def print_summary(report: Report, out: str, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=f"teacher-replay → {out}", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    rows = [("files", report.files), ("lines", report.lines),
            ("skipped lines", sum(report.skipped_lines.values())),
            ("traces", report.traces), ("states", report.states)]
    if not report.dry_run:
        rows += [("teacher calls made / cached / failed",
                  "{made} / {cached} / {failed}".format(**report.teacher_calls)),
                 ("all teachers excluded", report.states_all_teachers_excluded),
                 ("abstained", report.consensus.get("abstained", 0)),
                 ("consensus exact / intent tier",
                  f"{report.consensus.get('exact', 0)} / {report.consensus.get('intent', 0)}"),
                 ("agree", report.agree), ("pairs", report.pairs),
                 ("cost (USD)", f"{report.cost_usd:.4f}")]
    for teacher, est in sorted(report.extra.get("estimate", {}).items()):
        tokens = f"{est['prompt_tokens']:,}"
        rows.append((f"estimate {teacher}", f"{est['calls']} calls · {tokens} prompt tokens · "
                                            f"${est['cost_usd']:.2f}"))
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(table)
