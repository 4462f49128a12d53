"""The run, stage by stage: ingest → select → ask → decide → export (one package each under replay/),
written into a fresh folder inside OUT and swapped in at the end. I/O lives here, not in the libraries."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ingestion.schema import ReplayError
from ingestion.sources import find_files
from ingestion.stats import IngestStats
from ingestion.store import STATES_FILE as STATES_FILE  # re-exported: the name callers knew
from ingestion.store import load_states as load_states  # re-exported: the view and benches read it here
from replay.ingest.read import ingest_to_file as ingest_to_file  # re-exported: tests and benches call it
from replay.ingest.redaction import redaction_key
from replay.options import RunConfig
from replay.rundir.files import CONFIG_FILE, REPORT_FILE, write_json
from replay.rundir.outdir import check_out, keep_failed, run_folder, swap_in
from replay.rundir.report import Report, too_many_failed
from replay.rundir.sent import write_sent
from replay.select.filters import select_into

if TYPE_CHECKING:
    from teachers.pool import TeacherPool
    from teachers.registry import TeacherSpec


class RunFailed(ReplayError):
    """The run ended without a dataset worth writing (too many failed states): exit 1, OUT untouched."""


def run(config: RunConfig, console: Console | None = None,
        specs: Sequence[TeacherSpec] | None = None) -> Report:
    """The whole run: ingest, then (unless --dry-run or no teachers) ask, decide, pair and export.
    `specs`: `config.pool.teachers` already parsed (`parse_pool`) by the caller, else parsed here.

    Everything is written into a fresh folder inside OUT and swapped in at the end, so a run that
    fails (RunFailed, CacheError, an interrupt) leaves OUT's previous files as they were."""
    console = console or Console(stderr=True)
    check_out(config.out, config.force)
    stats = IngestStats()   # the listing's problems (a folder it cannot read) are ingestion's
    files = find_files(config.source, stats)  # a bad --source is one line before anything is opened or made
    pool, judge = None, None
    if config.pool is not None:
        from replay.ask.pool import build_pool, check_credentials
        from replay.export.write import check_export
        from teachers.registry import parse_pool

        # The pool is parsed once (here, or by the caller): a bad pool or endpoint is one line before any
        # work.
        specs = list(specs) if specs is not None else parse_pool(config.pool.teachers)
        if config.consensus.method == "judge" and config.consensus.judge:
            judge = parse_pool(config.consensus.judge)[0]
        if not config.dry_run:
            check_credentials(specs)  # before ingesting: a run without keys would only fail
            check_export(config)  # templates and tokenizers that do not load fail now, not after paying
        pool = build_pool(config.pool, specs)  # a cache fault stops us here
    try:
        if pool is not None and pool.cache.notice:
            console.print(f"[yellow]{pool.cache.notice}[/yellow]")
        if pool is not None and not config.dry_run:
            from replay.ask.pool import stop_unreachable

            stop_unreachable(pool, console)
        with run_folder(config.out) as work:
            report = _run_into(work, config, pool, judge, console, files, stats)
            swap_in(work, config.out)
    finally:
        if pool is not None:
            pool.cache.close()  # commits what is queued, gives back this run's leases
    return report


def _run_into(work: Path, config: RunConfig, pool: TeacherPool | None, judge: TeacherSpec | None,
              console: Console, files: list[Path], stats: IngestStats) -> Report:
    """Ingest → select → ask → decide → export, into the run's fresh folder `work`."""
    from replay.ingest.parallel import warm
    from replay.ingest.pseudonyms import OPERATIONAL, pseudonymise_json, start_run_pseudonyms
    from teachers.person_names import names_status
    from teachers.redact_state import StateRedactor

    key = redaction_key() if config.redact or config.pseudonymise else None
    pending = start_run_pseudonyms(files, key, config.redact) if key and config.pseudonymise else None
    warm(config.redact)   # the readers imported and the rules compiled while the files' heads are read
    pseudonyms = pending() if pending is not None else None
    redactor = (StateRedactor(key if config.redact else None, pseudonyms, config.names)
                if config.redact or pseudonyms is not None else None)
    names = names_status(config.pseudonymise, config.names,
                         redactor is not None and redactor.people is not None)
    if names.startswith("not looked for"):
        console.print(f"[yellow]names in prose are {names}[/yellow]")   # once, before any state is read
    if pool is not None:
        pool.pseudonyms = pseudonyms   # answers too: no teacher can bring a name back
    report, _ = ingest_to_file(config.source, work, config.ingest, console, redactor, files, stats)
    report.dry_run = config.dry_run
    report.extra["names_in_prose"] = names
    _check_scope(config, stats, report, console)
    if config.select:   # without filters, ingestion counted the outcomes (report.add_ingest)
        report.outcomes, report.states_unselected = select_into(work, config.select)
    write_json(work / CONFIG_FILE, pseudonymise_json(config.model_dump(mode="json"), pseudonyms, OPERATIONAL))
    if pool is not None:
        report.extra["unpriced"] = pool.unpriced()
    if pool is not None and config.dry_run:
        from replay.ask.estimate import ESTIMATE_MODEL, estimate_run
        from replay.ask.waves import estimate_waves

        report.extra["estimate"] = estimate_run(pool, work, config.pool.batch)
        report.extra["estimate_model"] = ESTIMATE_MODEL
        report.extra["estimate_sources"] = {t.name: pool.completion(t).source for t in pool.teachers}
        report.extra["trace_parallel"] = estimate_waves(pool, work, config.pool.trace_parallel, sum(
            row["cost_usd"] for row in report.extra["estimate"].values()))
    elif pool is not None:
        from replay.decide.run import decide_states
        from replay.export.write import export_pairs

        rows = decide_states(work, config, pool, judge, report, console)
        if failure := too_many_failed(report, config.max_failed):
            write_json(work / REPORT_FILE, pseudonymise_json(report.model_dump(), pseudonyms))
            kept = keep_failed(work, config.out)
            raise RunFailed(f"{failure}; {config.out} was left as it was (this run's report: "
                            f"{kept / REPORT_FILE}); every answer received is cached: fix the cause and "
                            f"run again")
        export_pairs(config, work, rows, report)
    write_sent(work, config, report, [t.name for t in pool.teachers] if pool is not None else [])
    # The report names files (problems) and the run's paths: pseudonymised like everything else.
    write_json(work / REPORT_FILE, pseudonymise_json(report.model_dump(), pseudonyms))
    return report


def _check_scope(config: RunConfig, stats: IngestStats, report: Report, console: Console) -> None:
    """--project / --exclude-project / --since / --until once every file is read: a --project that
    matches nothing stops the run (exit 2, OUT as it was); what a user would go on with is said."""
    scope = config.ingest.scope
    if scope is None or not scope.active():
        return
    from ingestion.scope import scope_problems

    errors, warnings = scope_problems(scope, stats.scope_matched, stats.filtered, report.states)
    if errors:
        raise ReplayError(errors[0])
    for line in warnings:
        console.print(f"[yellow]warning: {line}[/yellow]")
    # matched: [flag, glob, states it matched], the globs as values (pseudonymised like all text: a
    # glob may hold a name)
    matched = [[*name.split(":", 1), n] for name, n in sorted(stats.scope_matched.items())]
    report.extra["scope"] = {"filters": scope.model_dump(mode="json", exclude={"roots"}), "matched": matched,
                             "warnings": warnings}
