"""The progress bar every long stage of a run shows (on a terminal only: logs stay clean)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextmanager
def progress_bar(total: int, label: str, console: Console) -> Iterator[tuple[Progress, int]]:
    """A bar of `total` steps and its task id; `info` is a free text field beside the count."""
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[info]}"), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=False, disable=not console.is_terminal) as bar:
        yield bar, bar.add_task(label, total=total, info="")
