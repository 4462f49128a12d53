"""Ingest: every state under `--source` into the run folder (states.jsonl + traces.jsonl), redacted once."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ingestion.options import IngestOptions
from ingestion.shards import MergingWriter
from ingestion.sources import find_files, iter_states
from ingestion.stats import IngestStats
from replay.progress import progress_bar
from replay.rundir.report import Report

if TYPE_CHECKING:
    from teachers.redact_state import StateRedactor


def ingest_to_file(source: Path, out: Path, options: IngestOptions, console: Console | None = None,
                   redactor: StateRedactor | None = None, files: list[Path] | None = None,
                   stats: IngestStats | None = None) -> tuple[Report, IngestStats]:
    """Read every state under `source` into `out` (states.jsonl + traces.jsonl, ingestion/store.py), each
    redacted by `redactor` (the one redaction pass: teachers, outputs and the card all see these
    states); return the report so far. Large sources are read by worker processes
    (replay/ingest/parallel.py), with the same result. `files`: `source` listed already
    (`ingestion.sources.find_files`, into `stats`)."""
    from replay.ingest.parallel import auto_workers

    console = console or Console(stderr=True)
    if files is None or stats is None:
        stats = IngestStats()
        files = find_files(source, stats)
    workers = 1 if options.max_states is not None else auto_workers(files, options.workers)
    _ingest(source, files, out, options, console, stats, redactor, workers)
    if redactor is not None and redactor.people is not None and redactor.pseudonyms is not None:
        from replay.ingest.names_wide import replace_run_wide
        from teachers.person_names import KIND, run_wide
        from teachers.pseudonyms import PREFIX

        replaced, dropped = replace_run_wide(out, run_wide(redactor.people.found), redactor.pseudonyms)
        if replaced:
            redactor.counts[PREFIX + KIND] += replaced
        redactor.states_token_ids_dropped += dropped
    report = Report()
    report.add_ingest(stats)
    report.extra["ingest_workers"] = workers
    if redactor is not None:
        from teachers.redact_state import split_counts

        secrets, personal = split_counts(redactor.counts)
        if redactor.pseudonyms is None or redactor.pseudonyms.secrets:   # else --no-redact
            report.redactions = secrets
            report.extra["redaction"] = {"secrets": sum(secrets.values()),
                                         "states_token_ids_dropped": redactor.states_token_ids_dropped}
        if redactor.pseudonyms is not None:
            report.pseudonymised = personal
    return report, stats


def _ingest(source: Path, files: list[Path], out: Path, options: IngestOptions, console: Console,
            stats: IngestStats, redactor: StateRedactor | None, workers: int) -> None:
    from replay.ingest.parallel import parallel_shards, worker_pool

    with ExitStack() as stack:
        # The workers start before the progress bar's thread does (replay.ingest.parallel.worker_pool).
        pool = stack.enter_context(worker_pool(workers)) if workers > 1 else None
        bar, task = stack.enter_context(progress_bar(len(files), "ingesting", console))
        writer = stack.enter_context(MergingWriter(out))

        def done(_path: Path) -> None:
            bar.update(task, advance=1, info=f"{stats.states} states")

        if pool is not None:
            for shard in parallel_shards(pool, files, options, stats, redactor, on_file=done):
                writer.write_shard(shard)
        else:
            for state in iter_states(source, options, stats, files=files, on_file=done):
                writer.write(redactor(state) if redactor is not None else state)
