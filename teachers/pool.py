"""The teacher pool: every eligible teacher answers a state, concurrently, cached, within a budget.

One event loop; a semaphore per teacher plus a global one bound the calls in flight (the teacher's is
taken first, so a task queued for a busy teacher holds no global slot another teacher could use).
No call ever raises: failures become `Proposal(error=...)` and are counted.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import orjson

from ingestion.schema import Action, Proposal, TraceState
from teachers.cache import CacheEntry, ResponseCache, cache_key
from teachers.client import RetryPolicy, complete, describe_error, parse_action
from teachers.cost import Estimate, call_cost, estimate, usage
from teachers.redact_state import redact_action
from teachers.registry import TeacherSpec, split_by_family
from teachers.request import build_request
from teachers.stats import PoolStats, TeacherStats

# Bump when the way a state becomes a request changes, so old cache rows stop matching.
PROMPT_VERSION = "teachers-v1"
_REQUEST_MEMO = 256  # states whose built request is kept: one state is asked by every teacher x sample


class TeacherPool:
    """Ask a pool of teachers what they would do at a state.

    `timeout` is per attempt; `max_cost` (USD) stops new network calls once this run has spent it
    (cache hits are still served; the calls not made get `error="budget_exhausted"`).
    """

    def __init__(self, teachers: Sequence[TeacherSpec], *, cache: ResponseCache | None = None,
                 concurrency: int = 16, per_teacher: int = 8, timeout: float = 120.0, samples: int = 1,
                 max_cost: float | None = None, allow_same_family: bool = False,
                 retry: RetryPolicy | None = None, prompt_version: str = PROMPT_VERSION,
                 expected_completion_tokens: int = 400, max_response_bytes: int = 10_000_000,
                 redact_key: bytes | None = None) -> None:
        self.teachers = list(teachers)
        self.cache = cache if cache is not None else ResponseCache()
        self.concurrency, self.per_teacher = max(concurrency, 1), max(per_teacher, 1)
        self.timeout, self.samples, self.max_cost = timeout, max(samples, 1), max_cost
        self.allow_same_family = allow_same_family
        self.max_response_bytes = max_response_bytes
        # Answers are redacted like the states they answer (None: --no-redact), so no output holds a
        # secret-shaped string a teacher wrote either.
        self.redact_key = redact_key
        self.retry = retry or RetryPolicy()
        self.prompt_version = prompt_version
        self.expected_completion_tokens = expected_completion_tokens
        self.stats = PoolStats()
        self._requests: OrderedDict[str, tuple[TraceState, list[dict[str, Any]], list[dict[str, Any]]]] = \
            OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._global = asyncio.Semaphore(self.concurrency)
        self._per: dict[str, asyncio.Semaphore] = {}

    # --- what to ask -----------------------------------------------------------------------------

    def split(self, state: TraceState) -> tuple[list[TeacherSpec], list[TeacherSpec]]:
        """(eligible, excluded) for this state's student; counts nothing."""
        return split_by_family(self.teachers, state.student_model, self.allow_same_family)

    def request(self, state: TraceState) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The (messages, tools) every teacher receives for this state, in wire form. States come
        redacted (`teachers.redact_state`, run once per state by `replay.pipeline`); the pool sends them
        as they are."""
        memo = self._requests.get(state.state_id)
        if memo is not None and memo[0] is state:
            self._requests.move_to_end(state.state_id)
            return memo[1], memo[2]
        messages, tools = build_request(state)
        self._requests[state.state_id] = (state, messages, tools)
        if len(self._requests) > _REQUEST_MEMO:
            self._requests.popitem(last=False)
        return messages, tools

    def key(self, teacher: TeacherSpec, state: TraceState, sample: int) -> str:
        """The cache key of one call (what `replay.ablate` looks answers up by)."""
        messages, tools = self.request(state)
        return cache_key(teacher.model, teacher.params, messages, tools, sample, self.prompt_version)

    # --- asking ------------------------------------------------------------------------------------

    def eligible(self, state: TraceState) -> list[TeacherSpec]:
        """The teachers that may vote on this state, counting the state and its exclusions once."""
        eligible, excluded = self.split(state)
        self.stats.states += 1
        self.stats.excluded_same_family.update(t.name for t in excluded)
        if not eligible:
            self.stats.states_all_excluded += 1
        return eligible

    async def propose(self, state: TraceState) -> list[Proposal]:
        """Every eligible teacher x sample, concurrently, in pool order; [] if all are excluded."""
        return list(await asyncio.gather(*(self.ask(t, state, s) for t in self.eligible(state)
                                           for s in range(self.samples))))

    async def ask(self, teacher: TeacherSpec, state: TraceState, sample: int = 0) -> Proposal:
        """One teacher's answer: from the cache if it is there, else one call (with retries). Never raises."""
        base = {"state_id": state.state_id, "teacher": teacher.name, "model": teacher.model,
                "family": teacher.family, "sample": sample}
        counts = self.stats.teacher(teacher.name)
        try:
            key = self.key(teacher, state, sample)
            if (entry := self.cache.get(key)) is not None:
                counts.cached += 1
                return self._redacted(self._proposal(base, entry, counts, cached=True))
            messages, tools = self.request(state)
            total, mine = self._semaphores(teacher.name)
            async with mine, total:
                if self._over_budget():
                    counts.budget_exhausted += 1
                    return Proposal(**base, error="budget_exhausted")
                body = await complete(teacher, messages, tools, timeout=self.timeout, policy=self.retry,
                                      on_retry=lambda: setattr(counts, "retries", counts.retries + 1),
                                      max_response_bytes=self.max_response_bytes)
            entry = self._entry(teacher, body, sample)
            self.cache.put(key, entry)  # committed now: a killed run keeps what it paid for
        except Exception as error:  # one teacher failing never fails a run
            counts.failed += 1
            return Proposal(**base, error=describe_error(error, teacher))
        counts.made += 1
        counts.prompt_tokens += entry.prompt_tokens
        counts.completion_tokens += entry.completion_tokens
        counts.cost_usd += entry.cost_usd
        return self._redacted(self._proposal(base, entry, counts, cached=False))

    def estimate(self, state: TraceState) -> list[Estimate]:
        """Dry run: per eligible teacher, prompt tokens and USD for this state; no network.
        Calls the cache already holds are counted as `cached` and cost nothing."""
        messages, tools = self.request(state)
        out = []
        for teacher in self.split(state)[0]:
            hits = sum(self.cache.get(self.key(teacher, state, s)) is not None for s in range(self.samples))
            out.append(estimate(teacher, messages, tools, self.expected_completion_tokens,
                                calls=self.samples, cached=hits))
        return out

    # --- helpers -----------------------------------------------------------------------------------

    def _semaphores(self, teacher: str) -> tuple[asyncio.Semaphore, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a semaphore is bound to the loop it first waited on
            self._loop = loop
            self._global = asyncio.Semaphore(self.concurrency)
            self._per = {}
        if teacher not in self._per:
            self._per[teacher] = asyncio.Semaphore(self.per_teacher)
        return self._global, self._per[teacher]

    def _over_budget(self) -> bool:
        return self.max_cost is not None and self.stats.cost_usd >= self.max_cost

    def _redacted(self, proposal: Proposal) -> Proposal:
        if self.redact_key is None or proposal.action is None:
            return proposal
        return proposal.model_copy(update={"action": redact_action(proposal.action, self.redact_key)[0]})

    @staticmethod
    def _entry(teacher: TeacherSpec, body: dict[str, Any], sample: int) -> CacheEntry:
        choices = body.get("choices") or [{}]
        action, error = parse_action(choices[0].get("message") or {})
        prompt_tokens, completion_tokens = usage(body)
        return CacheEntry(model=teacher.model, sample=sample, response_json=orjson.dumps(body).decode(),
                          action_json=action.model_dump_json() if action else None, error=error,
                          prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                          cost_usd=call_cost(teacher.model, prompt_tokens, completion_tokens),
                          created=time.time())

    @staticmethod
    def _proposal(base: dict[str, Any], entry: CacheEntry, counts: TeacherStats, cached: bool) -> Proposal:
        if entry.error:
            counts.invalid += 1
        action = Action.model_validate_json(entry.action_json) if entry.action_json else None
        return Proposal(**base, action=action, error=entry.error, cached=cached,
                        prompt_tokens=entry.prompt_tokens, completion_tokens=entry.completion_tokens,
                        cost_usd=entry.cost_usd)

