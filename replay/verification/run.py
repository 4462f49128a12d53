"""One verification of a run folder: plan → the branches not graded yet → checks → the run's files again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import Field
from rich.console import Console

from collect.branch import BranchJob, BranchResult
from ingestion.schema import ReplayError, StrictModel
from replay.options import RunConfig
from replay.progress import progress_bar
from replay.rundir.files import CONFIG_FILE
from replay.rundir.outdir import made_by_run
from replay.verification.ledger import BRANCHES_FILE, VERIFY_DIR, Ledger, ledger_line, read_ledger
from replay.verification.outputs import run_rows, students_by_state, write_outputs
from replay.verification.plan import ARMS, Pair, Settings, plan_pairs
from replay.verification.rows import annotate, keep_verified
from replay.verification.summary import check_pair, estimate, summarize


class VerifyOptions(StrictModel):
    run: Path
    rollouts: Path
    instances: Path | None = None
    samples: int = Field(4, ge=1)
    max_turns: int | None = Field(None, ge=0)
    ray: str | None = None
    ray_dashboard: bool = False
    workers: int = Field(2, ge=1)
    verified_only: bool = False
    dry_run: bool = False
    student_url: str | None = None
    api_key: str = "EMPTY"
    command_timeout: int = Field(120, ge=1)
    output_limit: int = Field(20_000, ge=200)
    eval_timeout: int = Field(1800, ge=1)
    mem_limit: str = Field("8g", pattern=r"^\d+[bkmgBKMG]?$")
    cpus: float = Field(2.0, gt=0)


class VerifyError(ReplayError):
    """The verification cannot start as asked (one line for the user)."""


class VerifyFailed(ReplayError):
    """Branches ran and not one was graded: nothing to write (exit 1, OUT as it was)."""


def read_config(run: Path) -> RunConfig:
    if not made_by_run(run):
        raise VerifyError(f"--run {run}: not the --out folder of a replay.run (no run.json)")
    try:
        return RunConfig.model_validate(orjson.loads((run / CONFIG_FILE).read_bytes()))
    except ValueError as exc:
        raise VerifyError(f"--run {run}: its run.json cannot be read by this version ({exc})") from None


@dataclass
class Plan:
    config: RunConfig
    rows: list[dict[str, Any]]             # the run's own rows (replay.verification.outputs.run_rows)
    fresh: bool                            # ... read from a pairs.jsonl replay.run wrote since
    pairs: list[Pair]                      # the pairs among them, checkable or not
    done: dict[str, BranchResult]          # the ledger: every branch that ended, by key
    todo: list[BranchJob]                  # the branches not graded yet


def plan(options: VerifyOptions) -> Plan:
    """The run's settings and rows, the pairs in them, the results graded already and the jobs left."""
    config = read_config(options.run)
    if config.pool is None or config.dry_run:
        raise VerifyError(f"--run {options.run}: a dry run has no pairs (run replay.run with --teachers)")
    settings = Settings(samples=options.samples, max_turns=options.max_turns, student_url=options.student_url,
                        api_key=options.api_key, command_timeout=options.command_timeout,
                        output_limit=options.output_limit, eval_timeout=options.eval_timeout,
                        mem_limit=options.mem_limit, cpus=options.cpus)
    rows, fresh = run_rows(options.run)    # a pair the run's export left out (pre-flight) is not checked
    pairs = plan_pairs(options.run, options.rollouts, options.instances, settings,
                       only={row["state_id"] for row in rows})
    if options.instances is None and any(pair.reason == "instance_missing" for pair in pairs):
        raise VerifyError("--instances FILE is needed: the harness grades each branch with the instance's "
                          "row (the file the rollouts were collected from)")
    done = read_ledger(options.run / VERIFY_DIR / BRANCHES_FILE)
    todo = [job for pair in pairs for arm in ARMS for job in pair.jobs.get(arm, [])
            if not (job.key in done and done[job.key].graded)]
    return Plan(config, rows, fresh, pairs, done, todo)


def verify(options: VerifyOptions, console: Console | None = None) -> dict[str, Any]:
    """The whole verification; report.json's `verify` (or, with --dry-run, what it would take)."""
    console = console or Console(stderr=True)
    made = plan(options)
    config, pairs, done, todo = made.config, made.pairs, made.done, made.todo
    if options.dry_run:
        return {"dry_run": True, **estimate(pairs, len(todo))}
    redact = _redactor(config)
    state_of = {job.key: pair.state_id for pair in pairs for jobs in pair.jobs.values() for job in jobs}
    resumed = sum(1 for key in state_of if key in done and done[key].graded)
    figures: dict[str, Any] = {}
    if todo:
        figures = _run_branches(options, todo, done, state_of, redact, console)
    if state_of and not any(key in done and done[key].graded for key in state_of):
        kinds = sorted({done[key].error_kind or "?" for key in state_of if key in done})
        raise VerifyFailed(f"not one branch was graded ({', '.join(kinds) or 'none ran'}); {options.run} was "
                           f"left as it was (see {options.run / VERIFY_DIR / BRANCHES_FILE})")
    checks = [check_pair(pair, done) for pair in pairs]
    run_figures = _settings(options, config, todo, done, resumed) | ({"ray": figures} if figures else {})
    summary = summarize(pairs, checks, done, run_figures, _student_usd(pairs, done))
    by_state = {check.state_id: check for check in checks}
    annotated = annotate(made.rows, by_state, config.export.format, students_by_state(pairs))
    if options.verified_only:
        annotated = keep_verified(annotated)
    summary["rows"] = len(annotated)
    write_outputs(options.run, config, annotated, checks, summary, redact, made.rows if made.fresh else None)
    return summary


def _run_branches(options: VerifyOptions, todo: list[BranchJob], done: dict[str, BranchResult],
                  state_of: dict[str, str], redact: Callable[[Any], Any], console: Console) -> dict[str, Any]:
    from collect.branches import new_verify_id, run_here, run_on_ray
    from collect.on_ray import LABEL_OUT, out_key

    run_id, labels = new_verify_id(), {LABEL_OUT: out_key(options.run)}
    with Ledger(options.run / VERIFY_DIR / BRANCHES_FILE, redact) as ledger, \
            progress_bar(len(todo), "branches", console) as (bar, task):
        graded = 0

        def on_done(job: BranchJob, result: BranchResult) -> None:
            nonlocal graded
            ledger.write(ledger_line(job, result, state_of[job.key]))
            done[job.key] = result
            graded += result.graded
            bar.update(task, advance=1, info=f"graded {graded}")

        if options.ray:
            return run_on_ray(todo, on_done, options.ray, run_id, labels, options.ray_dashboard)
        run_here(todo, on_done, options.workers, run_id, labels)
    return {}


def _settings(options: VerifyOptions, config: RunConfig, todo: list[BranchJob],
              done: dict[str, BranchResult], resumed: int) -> dict[str, Any]:
    failed: dict[str, int] = {}
    for job in todo:
        result = done.get(job.key)
        if result is not None and not result.graded:
            failed[result.error_kind or "unknown"] = failed.get(result.error_kind or "unknown", 0) + 1
    return {"samples": options.samples, "max_turns": options.max_turns, "format": config.export.format,
            "verified_only": options.verified_only,
            "branches": {"run": len(todo), "resumed": resumed, "failed": dict(sorted(failed.items()))}}


def _student_usd(pairs: list[Pair], done: dict[str, BranchResult]) -> float:
    """The student's cost where it is an official API (litellm's price of its tokens); a vLLM is free."""
    from teachers.cost import call_cost

    total = 0.0
    for pair in pairs:
        for jobs in pair.jobs.values():
            for job in jobs:
                provider, result = job.config.get("student_provider"), done.get(job.key)
                if provider and result is not None and (result.prompt_tokens or result.completion_tokens):
                    total += call_cost(f"{provider}/{job.config['student_model']}", result.prompt_tokens,
                                       result.completion_tokens)
    return total


def _redactor(config: RunConfig) -> Callable[[Any], Any]:
    """What is written under OUT is redacted as the run's states were (not at all after --no-redact)."""
    if not config.redact:
        return lambda value: value
    from replay.ingest.redaction import redaction_key
    from teachers.redact import redact_value

    key = redaction_key()
    return lambda value: redact_value(value, key)[0]
