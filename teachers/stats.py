"""What a teacher pool did: calls, cache hits, failures, tokens, money, redactions, exclusions."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TeacherStats:
    """One teacher's counts. Tokens and cost are what this run paid: cache hits add none."""

    made: int = 0              # answers received over the network, each paid for (a malformed one
                               # asked again counts once per answer)
    cached: int = 0            # answers served from the cache, no network
    waited: int = 0            # of `cached`: answers another run (or task) was asking, waited for
    failed: int = 0            # calls that still failed after retries (not cached: a re-run tries again)
    invalid: int = 0           # calls whose answers stayed malformed after retries (not cached either)
    budget_exhausted: int = 0  # calls not made because --max-cost was reached
    retries: int = 0           # extra attempts the retry policy made
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, read from the provider's prompt cache
    cache_write_tokens: int = 0    # of prompt_tokens, written to it (Anthropic-style, billed above input)
    cost_usd: float = 0.0
    batched: int = 0               # of `made`, answered through a provider batch (half price)
    unreachable: int = 0           # of `failed`: not made or given up because the endpoint is unreachable
    rate_limited: int = 0          # attempts answered 429 (each retried within the policy)
    tokens_per_minute: int = 0     # achieved: answers' prompt + completion tokens per minute of calling


@dataclass
class PoolStats:
    """Totals are sums over `per_teacher`, so they can never disagree with it."""

    per_teacher: dict[str, TeacherStats] = field(default_factory=dict)
    redactions: Counter[str] = field(default_factory=Counter)            # kind -> secrets redacted
    excluded_same_family: Counter[str] = field(default_factory=Counter)  # teacher -> states skipped
    states: int = 0                  # states proposed on
    states_all_excluded: int = 0     # states where every teacher was of the student's family

    def teacher(self, name: str) -> TeacherStats:
        return self.per_teacher.setdefault(name, TeacherStats())

    def _sum(self, name: str) -> Any:
        return sum(getattr(t, name) for t in self.per_teacher.values())

    @property
    def made(self) -> int:
        return self._sum("made")

    @property
    def cached(self) -> int:
        return self._sum("cached")

    @property
    def failed(self) -> int:
        return self._sum("failed")

    @property
    def waited(self) -> int:
        return self._sum("waited")

    @property
    def invalid(self) -> int:
        return self._sum("invalid")

    @property
    def budget_exhausted(self) -> int:
        return self._sum("budget_exhausted")

    @property
    def retries(self) -> int:
        return self._sum("retries")

    @property
    def prompt_tokens(self) -> int:
        return self._sum("prompt_tokens")

    @property
    def completion_tokens(self) -> int:
        return self._sum("completion_tokens")

    @property
    def cached_prompt_tokens(self) -> int:
        return self._sum("cached_prompt_tokens")

    @property
    def cost_usd(self) -> float:
        return float(self._sum("cost_usd"))

    def to_report(self) -> dict[str, Any]:
        """The keys report.json wants, plus the per-teacher breakdown.

        >>> s = PoolStats(); s.teacher("a").made += 1; s.teacher("a").cost_usd += 0.5
        >>> r = s.to_report(); r["teacher_calls"]["made"], r["cost_usd"], r["per_teacher"]["a"]["made"]
        (1, 0.5, 1)
        """
        return {
            "teacher_calls": {"made": self.made, "cached": self.cached, "failed": self.failed,
                              "invalid": self.invalid, "budget_exhausted": self.budget_exhausted,
                              "waited": self.waited,
                              "retries": self.retries},
            "excluded_same_family": dict(sorted(self.excluded_same_family.items())),
            "states_all_teachers_excluded": self.states_all_excluded,
            "redactions": dict(sorted(self.redactions.items())),
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens,
                       "cached_prompt": self.cached_prompt_tokens},
            "cost_usd": round(self.cost_usd, 6),
            "per_teacher": {name: asdict(t) for name, t in sorted(self.per_teacher.items())},
        }
