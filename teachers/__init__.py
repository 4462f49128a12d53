"""teacher-replay: teachers — the pool of teacher LLMs that answer each trace state.

Registry & families (`registry`), secret redaction (`redact`), the SQLite response cache (`cache`),
litellm calls with one retry policy (`client`), cost from returned usage (`cost`), the providers'
prompt caches (`prompt_cache`), the `--max-cost` cap (`spend`), batch APIs (`batch`, `batch_store`),
and the pool that ties them (`pool`).
Importing this package is cheap: litellm and the RE2 secret rules load on first use.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

# name -> module: imported on first use, so that a reader of sessions (the redaction its only need of
# this package) does not load httpx and the pool's machinery (0.15 s of every run's start, issue #39).
_EXPORTS = {
    "CacheEntry": "cache", "CacheError": "cache", "ResponseCache": "cache", "cache_key": "cache",
    "RetryPolicy": "client", "Estimate": "cost", "estimate": "cost", "PROMPT_VERSION": "pool",
    "TeacherPool": "pool", "redact_messages": "redact", "redact_text": "redact",
    "TeacherConfigError": "registry", "TeacherSpec": "registry", "aliases": "registry",
    "infer_family": "registry", "parse_pool": "registry", "split_by_family": "registry",
    "PoolStats": "stats", "TeacherStats": "stats",
}

if TYPE_CHECKING:
    from teachers.cache import CacheEntry, CacheError, ResponseCache, cache_key
    from teachers.client import RetryPolicy
    from teachers.cost import Estimate, estimate
    from teachers.pool import PROMPT_VERSION, TeacherPool
    from teachers.redact import redact_messages, redact_text
    from teachers.registry import (
        TeacherConfigError,
        TeacherSpec,
        aliases,
        infer_family,
        parse_pool,
        split_by_family,
    )
    from teachers.stats import PoolStats, TeacherStats


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'teachers' has no attribute {name!r}")
    value = getattr(import_module(f"teachers.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "PROMPT_VERSION", "CacheEntry", "CacheError", "Estimate", "PoolStats", "ResponseCache", "RetryPolicy",
    "TeacherConfigError", "TeacherPool", "TeacherSpec", "TeacherStats", "aliases", "cache_key",
    "estimate", "infer_family", "parse_pool", "redact_messages", "redact_text", "split_by_family",
]
