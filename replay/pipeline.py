"""The run: ingest → (teachers → consensus → pairs) → outputs. I/O lives here, not in the libraries."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ingestion.options import IngestOptions
from ingestion.schema import ReplayError
from ingestion.shards import MergingWriter
from ingestion.sources import find_files, iter_states
from ingestion.stats import IngestStats
from ingestion.store import STATES_FILE as STATES_FILE  # re-exported: the name callers knew
from ingestion.store import load_states as load_states  # re-exported: the view and benches read it here
from replay.files import CONFIG_FILE, PROPOSALS_FILE, REPORT_FILE, write_json, write_jsonl
from replay.options import PoolOptions, RunConfig
from replay.outdir import check_out, keep_failed, run_folder, swap_in
from replay.report import Report, failure_kinds, too_many_failed
from replay.select import asked_states, select_into
from replay.waves import estimate_waves

if TYPE_CHECKING:
    from teachers.pool import TeacherPool
    from teachers.redact_state import StateRedactor


@contextmanager
def _progress(total: int, label: str, console: Console) -> Iterator[tuple[Progress, int]]:
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[info]}"), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=False, disable=not console.is_terminal) as bar:
        yield bar, bar.add_task(label, total=total, info="")


def ingest_to_file(source: Path, out: Path, options: IngestOptions, console: Console | None = None,
                   redactor: StateRedactor | None = None) -> tuple[Report, IngestStats]:
    """Read every state under `source` into `out` (states.jsonl + traces.jsonl, ingestion/store.py), each
    redacted by `redactor` (the one redaction pass: teachers, outputs and the card all see these
    states); return the report so far. Large sources are read by worker processes
    (replay/parallel_ingest.py), with the same result."""
    from replay.parallel_ingest import auto_workers

    console = console or Console(stderr=True)
    stats = IngestStats()
    files = find_files(source, stats)
    workers = 1 if options.max_states is not None else auto_workers(files, options.workers)
    _ingest(source, files, out, options, console, stats, redactor, workers)
    report = Report()
    report.add_ingest(stats)
    report.extra["ingest_workers"] = workers
    if redactor is not None:
        report.redactions = dict(sorted(redactor.counts.items()))
        report.extra["redaction"] = {"secrets": sum(redactor.counts.values()),
                                     "states_token_ids_dropped": redactor.states_token_ids_dropped}
    return report, stats


def _ingest(source: Path, files: list[Path], out: Path, options: IngestOptions, console: Console,
            stats: IngestStats, redactor: StateRedactor | None, workers: int) -> None:
    from replay.parallel_ingest import parallel_shards, worker_pool

    with ExitStack() as stack:
        # The workers start before the progress bar's thread does (parallel_ingest.worker_pool).
        pool = stack.enter_context(worker_pool(workers)) if workers > 1 else None
        bar, task = stack.enter_context(_progress(len(files), "ingesting", console))
        writer = stack.enter_context(MergingWriter(out))

        def done(_path: Path) -> None:
            bar.update(task, advance=1, info=f"{stats.states} states")

        if pool is not None:
            for shard in parallel_shards(pool, files, options, stats, redactor, on_file=done):
                writer.write_shard(shard)
        else:
            for state in iter_states(source, options, stats, files=files, on_file=done):
                writer.write(redactor(state) if redactor is not None else state)


def redaction_key() -> bytes:
    """The key of the placeholders' tags: `$REPLAY_REDACT_KEY`, else a random key kept in the user cache
    dir (created once, mode 600). Stable, so a re-run redacts to the same text and hits the cache."""
    if os.environ.get("REPLAY_REDACT_KEY"):
        return os.environ["REPLAY_REDACT_KEY"].encode()
    import platformdirs

    path = Path(platformdirs.user_cache_dir("teacher-replay")) / "redact.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another run made it first
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(os.urandom(32).hex())
    return path.read_text().strip().encode()


class RunFailed(ReplayError):
    """The run ended without a dataset worth writing (too many failed states): exit 1, OUT untouched."""


def run(config: RunConfig, console: Console | None = None) -> Report:
    """The whole run: ingest, then (unless --dry-run or no teachers) ask, decide, pair and export.

    Everything is written into a fresh folder inside OUT and swapped in at the end, so a run that
    fails (RunFailed, CacheError, an interrupt) leaves OUT's previous files as they were."""
    console = console or Console(stderr=True)
    check_out(config.out, config.force)
    find_files(config.source)  # a bad --source is one line before anything is opened or made
    if config.pool is not None:
        from teachers.registry import parse_pool

        parse_pool(config.pool.teachers)  # a bad pool or endpoint is one line before any work
        if not config.dry_run:
            check_credentials(config.pool.teachers)  # before ingesting: a run without keys would only fail
            check_export(config)  # templates and tokenizers that do not load fail now, not after paying
    pool = build_pool(config.pool) if config.pool is not None else None  # a cache fault stops us here
    try:
        if pool is not None and pool.cache.notice:
            console.print(f"[yellow]{pool.cache.notice}[/yellow]")
        if pool is not None and not config.dry_run:
            stop_unreachable(pool, console)
        with run_folder(config.out) as work:
            report = _run_into(work, config, pool, console)
            swap_in(work, config.out)
    finally:
        if pool is not None:
            pool.cache.close()  # commits what is queued, gives back this run's leases
    return report


def _run_into(work: Path, config: RunConfig, pool: TeacherPool | None, console: Console) -> Report:
    from teachers.redact_state import StateRedactor

    redactor = StateRedactor(redaction_key()) if config.redact else None
    report, _ = ingest_to_file(config.source, work, config.ingest, console, redactor)
    report.dry_run = config.dry_run
    if config.select:   # without filters, ingestion counted the outcomes (report.add_ingest)
        report.outcomes, report.states_unselected = select_into(work, config.select)
    write_json(work / CONFIG_FILE, config.model_dump(mode="json"))
    if pool is not None:
        report.extra["unpriced"] = pool.unpriced()
    if pool is not None and config.dry_run:
        report.extra["estimate"] = estimate_run(pool, work, config.pool.batch)
        report.extra["estimate_model"] = ESTIMATE_MODEL
        report.extra["estimate_sources"] = {t.name: pool.completion(t).source for t in pool.teachers}
        report.extra["trace_parallel"] = estimate_waves(pool, work, config.pool.trace_parallel, sum(
            row["cost_usd"] for row in report.extra["estimate"].values()))
    elif pool is not None:
        rows = _ask(work, config, pool, report, console)
        if failure := too_many_failed(report, config.max_failed):
            write_json(work / REPORT_FILE, report.model_dump())
            kept = keep_failed(work, config.out)
            raise RunFailed(f"{failure}; {config.out} was left as it was (this run's report: "
                            f"{kept / REPORT_FILE}); every answer received is cached: fix the cause and "
                            f"run again")
        export_pairs(config, work, rows, report)
    write_json(work / REPORT_FILE, report.model_dump())
    return report


def stop_unreachable(pool: TeacherPool, console: Console) -> None:
    """Probe each teacher endpoint once (teachers.probe): none reachable is one line and exit 1 before
    any work; the unreachable ones are stopped (their calls fail as `unreachable`) and named."""
    from teachers.probe import check_reachable

    for name, why in check_reachable(pool.teachers).items():
        pool.breaker.trip(name, why)
        console.print(f"[yellow]teacher {name} cannot be reached ({why}): its calls count as failed, "
                      f"reason unreachable[/yellow]")


def check_credentials(teachers: str) -> None:
    """One clear line naming the API keys the pool lacks, instead of a run of failed calls."""
    from teachers.client import missing_keys
    from teachers.registry import parse_pool

    lacking = [f"{spec.name} needs {' or '.join(keys)}" for spec in parse_pool(teachers)
               if (keys := missing_keys(spec))]
    if lacking:
        raise ReplayError("no API key for the teachers: " + "; ".join(lacking)
                          + " (set it in the environment, or use --dry-run to estimate without calling)")


def build_pool(options: PoolOptions) -> TeacherPool:
    """The pool on its cache (opened and checked here: `CacheError` before anything is asked)."""
    from teachers.cache import ResponseCache
    from teachers.llm import load_litellm
    from teachers.pool import TeacherPool
    from teachers.registry import parse_pool

    load_litellm()  # its 3 s import now, not on the threads of the first calls
    return TeacherPool(parse_pool(options.teachers), cache=ResponseCache(options.cache),
                       concurrency=options.concurrency, per_teacher=options.per_teacher,
                       timeout=options.timeout, samples=options.samples, max_cost=options.max_cost,
                       allow_same_family=options.allow_same_family,
                       max_response_bytes=options.max_response_bytes,
                       redact_key=redaction_key() if options.redact else None)


ESTIMATE_MODEL = ("prompt cache modelled per trace: a trace's first state at full price, then the prefix "
                  "each state shares with the previous one at the cached price where the provider caches "
                  "(teachers/prompt_cache.py); completion tokens per call learned from each teacher's "
                  "answers in the cache, else a prior (teachers/learned.py, configs/estimate.toml)")


def estimate_run(pool: TeacherPool, out: Path, batch: bool = False) -> dict[str, dict[str, float]]:
    """--dry-run with teachers: tokens and USD each teacher would cost; calls nothing. States are read
    in file order, which is each trace's turn order: the prompt cache is modelled per trace. `batch`:
    teachers with a batch API at batch rates."""
    from teachers.batch import batch_provider

    batched = {t.name for t in pool.teachers if batch and batch_provider(t)}
    totals: dict[str, dict[str, float]] = {}
    for state in asked_states(out):
        for est in pool.estimate(state, batched):
            row = totals.setdefault(est.teacher, {"calls": 0, "cached": 0, "prompt_tokens": 0,
                                                  "cached_prompt_tokens": 0, "completion_tokens": 0,
                                                  "cost_usd": 0.0, "cost_usd_low": 0.0,
                                                  "cost_usd_high": 0.0})
            row["calls"] += est.calls
            row["cached"] += est.cached
            row["prompt_tokens"] += est.prompt_tokens * est.calls
            row["cached_prompt_tokens"] += est.cached_prompt_tokens * est.calls
            row["completion_tokens"] += est.completion_tokens * est.calls
            row["cost_usd"] += est.cost_usd
            row["cost_usd_low"] += est.cost_usd_low
            row["cost_usd_high"] += est.cost_usd_high
            if est.batch:
                row["batch"] = True
                row["cost_usd_if_cached"] = row.get("cost_usd_if_cached", 0.0) + (est.cost_usd_if_cached
                                                                                   or 0.0)
    return totals


def _ask(work: Path, config: RunConfig, pool: TeacherPool, report: Report, console: Console) -> list:
    """Teachers → consensus → pairs for every state in `work`; proposals.jsonl; the report's counts."""
    from replay.decide import finish_hindsight
    from replay.hindsight import read_recoveries
    from replay.looplag import QuietGC
    from replay.verdicts import VERDICTS_FILE

    with QuietGC() as quiet:
        outcomes, judge, lag = asyncio.run(_replay(work, config, pool, report, console, quiet))
    proposals = (p.model_dump(mode="json") for p in outcomes.ordered_proposals())
    write_jsonl(work / PROPOSALS_FILE, proposals)
    write_jsonl(work / VERDICTS_FILE, outcomes.ordered_verdicts())
    finish_hindsight(outcomes, read_recoveries(work))  # recoveries among all states, asked or not
    _fill_report(report, pool, outcomes, judge)
    report.extra["loop_lag_ms"] = {**lag.summary(), "full_collections": quiet.catch_ups}
    report.extra["failure_kinds"] = failure_kinds(outcomes.ordered_proposals())
    return outcomes.ordered_rows()


async def _replay(work: Path, config: RunConfig, pool: TeacherPool, report: Report, console: Console,
                  quiet: Any) -> tuple[Any, Any, Any]:
    from replay.ask import Judge
    from replay.decide import replay_states
    from replay.export.formats import KEEP
    from replay.looplag import LoopLag
    from teachers.registry import parse_pool

    judge = None
    if config.consensus.method == "judge":
        if not config.consensus.judge:
            raise ReplayError("--consensus judge needs --judge MODEL")
        judge = Judge(parse_pool(config.consensus.judge)[0], pool.cache, pool)
    if config.pool is not None and config.pool.batch:
        report.extra["batch"] = await prefetch_batches(work, config, pool, console)
    with _progress(report.states - report.states_unselected, "teachers", console) as (bar, task):
        def tick() -> None:
            stats = pool.stats
            bar.update(task, advance=1, info=f"calls {stats.made} · cached {stats.cached} · "
                                             f"failed {stats.failed} · ${stats.cost_usd:.4f}")

        async with LoopLag() as lag, quiet.freezing():
            try:
                outcomes = await replay_states(
                    asked_states(work), pool, config.consensus, judge, on_state=tick,
                    again=lambda: asked_states(work), keep=KEEP[config.export.format],
                    trace_parallel=config.pool.trace_parallel if config.pool else 1)
            except* ReplayError as group:  # a cache fault in one task stops them all: say it once
                raise group.exceptions[0] from None
    return outcomes, judge, lag


async def prefetch_batches(work: Path, config: RunConfig, pool: TeacherPool,
                           console: Console) -> dict[str, Any]:
    """--batch: the batchable calls through the providers' batch APIs, answers into the cache."""
    from dataclasses import asdict

    from teachers.batch import Batcher
    from teachers.batch_store import BatchStore

    store = BatchStore(pool.cache.path)
    try:
        batcher = Batcher(pool, store, poll=config.pool.batch_poll if config.pool else 30.0,
                          note=lambda text: console.print(text))
        return asdict(await batcher.prefetch(asked_states(work)))
    finally:
        store.close()


def _fill_report(report: Report, pool: TeacherPool, outcomes: Any, judge: Any) -> None:
    from replay.decide import tier_counts

    pool_report = pool.stats.to_report()
    report.teacher_calls = pool_report["teacher_calls"]
    report.excluded_same_family = pool_report["excluded_same_family"]
    report.tokens = pool_report["tokens"]
    report.cost_usd = pool_report["cost_usd"]
    report.extra["per_teacher"] = pool_report["per_teacher"]
    report.extra["rate_limits"] = pool.pacing()
    prompt = report.tokens["prompt"]
    share = report.tokens["cached_prompt"] / prompt if prompt else 0.0
    report.extra["prompt_cache"] = {"hit_share": round(share, 4)}
    report.extra["spend"] = {"max_cost": pool.spend.cap,
                             "largest_call_usd": round(pool.spend.largest_call, 6)}
    verdicts = outcomes.verdicts
    report.states_all_teachers_excluded = verdicts["all_teachers_excluded"]
    report.states_failed, report.states_budget_stopped = verdicts["failed"], outcomes.budget_stopped
    report.consensus = {"reached": verdicts["agree"] + verdicts["pair"], "abstained": verdicts["abstained"],
                        **tier_counts(outcomes.tiers, outcomes.agree_tiers)}
    if outcomes.invalid:  # screened out against the state's tools: no vote, never chosen
        screened = sum(outcomes.invalid.values())
        report.teacher_calls["invalid"] = report.teacher_calls.get("invalid", 0) + screened
        report.extra["invalid_proposals"] = dict(sorted(outcomes.invalid.items()))
    report.agree, report.pairs = verdicts["agree"], verdicts["pair"]
    report.hindsight = outcomes.hindsight.model_dump()
    if outcomes.reliability is not None:  # --consensus weighted: the weights it voted with
        report.extra["reliability"] = outcomes.reliability.model_dump()
    report.extra["early_stop"] = {"calls_saved": outcomes.calls_saved,
                                  "usd_saved": round(outcomes.usd_saved, 6)}
    if judge is not None:
        report.extra["judge_calls"] = judge.calls
        report.cost_usd = round(report.cost_usd + judge.cost_usd, 6)


def check_export(config: RunConfig) -> None:
    """Load what the export will need (templates, tokenizers) so a typo fails before any call."""
    from ingestion.tokens import counter_for
    from replay.export.checks import load_templates

    load_templates(config.export)
    counter_for(config.export.tokenizer)
    if config.export.preflight_tokenizer:
        counter_for(config.export.preflight_tokenizer)


def export_pairs(config: RunConfig, out: Path, rows: list[dict[str, Any]], report: Report) -> None:
    """Length re-check and pre-flight, then the dataset, pairs.jsonl and the dataset card, into `out`."""
    from replay.export.card import run_card_info
    from replay.export.checks import check_rows
    from replay.export.dataset import export_dataset, push_to_hub, write_card
    from replay.export.formats import format_counts, format_rows

    fmt = config.export.format
    judged, rows = rows, format_rows(rows, fmt)
    rows, checks = check_rows(rows, config.export)
    report.extra["format"] = format_counts(judged, rows, fmt)
    report.preflight_dropped = sum(checks["dropped"].values())
    report.extra["preflight_dropped_by_reason"] = checks["dropped"]
    report.extra["lengths"] = checks["lengths"]
    if checks["templates"]:
        report.extra["preflight_templates"] = checks["templates"]
    dataset = export_dataset(rows, out, test_split=config.export.test_split, fmt=fmt)
    report.extra["dataset_rows"] = len(rows)
    if config.export.test_split is not None:
        report.extra["splits"] = {name: part.num_rows for name, part in dataset.items()}
    write_card(out, run_card_info(config, rows, report))
    if config.export.push_to_hub:
        push_to_hub(out, config.export.push_to_hub)
