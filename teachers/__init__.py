"""teacher-replay: teachers — the pool of teacher LLMs that answer each trace state.

Registry & families (`registry`), secret redaction (`redact`), the SQLite response cache (`cache`),
litellm calls with one retry policy (`client`), cost from returned usage (`cost`), the providers'
prompt caches (`prompt_cache`), the `--max-cost` cap (`spend`), batch APIs (`batch`, `batch_store`),
and the pool that ties them (`pool`).
Importing this package is cheap: litellm and the RE2 secret rules load on first use.
"""

from teachers.cache import CacheEntry, ResponseCache, cache_key
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

__all__ = [
    "PROMPT_VERSION", "CacheEntry", "Estimate", "PoolStats", "ResponseCache", "RetryPolicy",
    "TeacherConfigError", "TeacherPool", "TeacherSpec", "TeacherStats", "aliases", "cache_key",
    "estimate", "infer_family", "parse_pool", "redact_messages", "redact_text", "split_by_family",
]
