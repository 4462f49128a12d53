"""The run: ingest → (teachers → consensus → pairs) → outputs. I/O lives here, not in the libraries."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ingestion.options import IngestOptions
from ingestion.schema import TraceState
from ingestion.sources import find_files, iter_states
from ingestion.stats import IngestStats
from replay.report import Report, write_json

STATES_FILE = "states.jsonl"
REPORT_FILE = "report.json"


@contextmanager
def _progress(total: int, label: str, console: Console) -> Iterator[tuple[Progress, int]]:
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[info]}"), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=False, disable=not console.is_terminal) as bar:
        yield bar, bar.add_task(label, total=total, info="")


def dump_state(state: TraceState) -> bytes:
    return orjson.dumps(state.model_dump(mode="json")) + b"\n"


def ingest_to_file(source: Path, out: Path, options: IngestOptions,
                   console: Console | None = None) -> tuple[Report, IngestStats]:
    """Read every state under `source` into `out/states.jsonl`; return the report so far."""
    console = console or Console(stderr=True)
    out.mkdir(parents=True, exist_ok=True)
    files = find_files(source)
    stats = IngestStats()
    target = out / STATES_FILE
    tmp = target.with_name(target.name + ".tmp")
    with _progress(len(files), "ingesting", console) as (bar, task), open(tmp, "wb") as handle:
        def done(_path: Path) -> None:
            bar.update(task, advance=1, info=f"{stats.states} states")

        for state in iter_states(source, options, stats, files=files, on_file=done):
            handle.write(dump_state(state))
    os.replace(tmp, target)
    report = Report()
    report.add_ingest(stats)
    return report, stats


def load_states(path: Path) -> Iterator[TraceState]:
    """States written by an earlier run (states.jsonl)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                yield TraceState.model_validate(orjson.loads(line))


def dry_run(source: Path, out: Path, options: IngestOptions, console: Console | None = None) -> Report:
    report, _ = ingest_to_file(source, out, options, console)
    report.dry_run = True
    write_json(out / REPORT_FILE, report.model_dump())
    return report
