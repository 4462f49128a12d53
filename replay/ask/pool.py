"""The teacher pool a run asks: its keys checked, built on its cache, unreachable endpoints stopped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ingestion.schema import ReplayError
from replay.ingest.redaction import redaction_key
from replay.options import PoolOptions

if TYPE_CHECKING:
    from teachers.pool import TeacherPool
    from teachers.registry import TeacherSpec


def stop_unreachable(pool: TeacherPool, console: Console) -> None:
    """Probe each teacher endpoint once (teachers.probe): none reachable is one line and exit 1 before
    any work; the unreachable ones are stopped (their calls fail as `unreachable`) and named."""
    from teachers.probe import check_reachable

    for name, why in check_reachable(pool.teachers).items():
        pool.breaker.trip(name, why)
        console.print(f"[yellow]teacher {name} cannot be reached ({why}): its calls count as failed, "
                      f"reason unreachable[/yellow]")


def check_credentials(specs: list[TeacherSpec]) -> None:
    """One clear line naming the API keys the pool lacks, instead of a run of failed calls."""
    from teachers.client import missing_keys

    lacking = [f"{spec.name} needs {' or '.join(keys)}" for spec in specs if (keys := missing_keys(spec))]
    if lacking:
        raise ReplayError("no API key for the teachers: " + "; ".join(lacking)
                          + " (set it in the environment, or use --dry-run to estimate without calling)")


def build_pool(options: PoolOptions, specs: list[TeacherSpec]) -> TeacherPool:
    """The pool of `specs` (`options.teachers` as `teachers.registry.parse_pool` read it, once per
    process) on its cache (opened and checked here: `CacheError` before anything is asked)."""
    from teachers.cache import ResponseCache
    from teachers.llm import load_litellm
    from teachers.pool import TeacherPool

    load_litellm()  # its 3 s import now, not on the threads of the first calls
    return TeacherPool(specs, cache=ResponseCache(options.cache),
                       concurrency=options.concurrency, per_teacher=options.per_teacher,
                       timeout=options.timeout, samples=options.samples, max_cost=options.max_cost,
                       allow_same_family=options.allow_same_family,
                       max_response_bytes=options.max_response_bytes,
                       redact_key=redaction_key() if options.redact else None)
