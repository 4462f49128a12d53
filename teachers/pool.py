"""The teacher pool: every eligible teacher answers a state, concurrently, cached, within a budget.

One event loop; a semaphore per teacher plus a global one bound the calls in flight (the teacher's is
taken first, so a task queued for a busy teacher holds no global slot another teacher could use).
No call ever raises: failures become `Proposal(error=...)` and are counted.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any

import orjson

from ingestion.schema import Action, Proposal, TraceState
from teachers.cache import CacheEntry, ResponseCache, cache_key
from teachers.client import RetryPolicy, complete, describe_error, parse_action
from teachers.cost import Estimate, Tokens, cost_of, response_cost, tokens_of, unpriced_reason
from teachers.prompt_cache import PrefixModel
from teachers.redact_state import redact_action
from teachers.registry import TeacherSpec, split_by_family
from teachers.request import build_request, call_options
from teachers.spend import Spend, worst_case
from teachers.stats import PoolStats, TeacherStats

# Bump when the way a state becomes a request changes, so old cache rows stop matching.
PROMPT_VERSION = "teachers-v1"
_REQUEST_MEMO = 256  # states whose built request is kept: one state is asked by every teacher x sample


class TeacherPool:
    """Ask a pool of teachers what they would do at a state.

    `timeout` is per attempt; `max_cost` (USD) is a hard cap on what this run spends (`teachers.spend`:
    each call reserves its worst case before it is sent; cache hits are still served; the calls that no
    longer fit get `error="budget_exhausted"`).
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
        self.spend = Spend(max_cost)
        self.batched: dict[str, bool] = {}  # keys a provider batch answered in this run: paid now, not cached
        self._live = PrefixModel()       # the prompt cache as the calls of this run meet it (reservations)
        self._planned = PrefixModel()    # the same for a dry run's estimate
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
                if self.batched.pop(key, None) is not None:  # this run's batch paid for it
                    self._count_made(counts, entry, orjson.loads(entry.response_json or "{}"), batched=True)
                    return self._redacted(self._proposal(base, entry, counts, cached=False))
                counts.cached += 1
                return self._redacted(self._proposal(base, entry, counts, cached=True))
            messages, tools = self.request(state)
            expected, worst = self._reservation(teacher, state, messages, tools)
            total, mine = self._semaphores(teacher.name)
            async with mine, total:
                held = await self.spend.reserve(expected, worst)
                if held is None:
                    counts.budget_exhausted += 1
                    return Proposal(**base, error="budget_exhausted")
                paid = 0.0
                options = call_options(teacher.model, teacher.api_base, state.trace_id)
                try:
                    body = await complete(teacher, messages, tools, timeout=self.timeout, policy=self.retry,
                                          on_retry=lambda: setattr(counts, "retries", counts.retries + 1),
                                          max_response_bytes=self.max_response_bytes, options=options)
                    paid = response_cost(teacher, body)
                finally:
                    await self.spend.settle(held, paid)
            entry = self._entry(teacher, body, sample, paid)
            self.cache.put(key, entry)  # committed now: a killed run keeps what it paid for
        except Exception as error:  # one teacher failing never fails a run
            counts.failed += 1
            return Proposal(**base, error=describe_error(error, teacher))
        self._count_made(counts, entry, body)
        return self._redacted(self._proposal(base, entry, counts, cached=False))

    def _reservation(self, teacher: TeacherSpec, state: TraceState, messages: list[dict[str, Any]],
                     tools: list[dict[str, Any]]) -> tuple[float, float]:
        """(expected, worst) USD of the call about to be sent; (0, 0) without a cap (nothing to reserve)."""
        if self.spend.cap is None:
            return 0.0, 0.0
        tokens = self._live.predict(teacher, state.trace_id, messages, tools, self.expected_completion_tokens)
        return cost_of(teacher, tokens), worst_case(teacher, tokens.prompt)

    @staticmethod
    def _count_made(counts: TeacherStats, entry: CacheEntry, body: dict[str, Any],
                    batched: bool = False) -> None:
        tokens = tokens_of(body)
        counts.made += 1
        counts.batched += batched
        counts.prompt_tokens += entry.prompt_tokens
        counts.completion_tokens += entry.completion_tokens
        counts.cached_prompt_tokens += tokens.cached
        counts.cache_write_tokens += tokens.cache_write
        counts.cost_usd += entry.cost_usd

    def prefix_tokens(self, teacher: TeacherSpec, messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]]) -> list[int]:
        """Tokens of each block of a request (tools, then each message), counted once per message."""
        return self._live.blocks(teacher, messages, tools)[1]

    def store_batch_answer(self, teacher: TeacherSpec, key: str, sample: int, body: dict[str, Any]) -> None:
        """An answer a provider batch returned: into the cache at the batch price, counted as made
        (not cached) when this run asks for it."""
        self.cache.put(key, self._entry(teacher, body, sample, response_cost(teacher, body, batch=True)))
        self.batched[key] = True

    def estimate(self, state: TraceState, batch: Collection[str] = ()) -> list[Estimate]:
        """Dry run: per eligible teacher, tokens and USD for this state; no network. Call in turn order:
        the prompt cache is modelled per trace (`teachers.prompt_cache`): the prefix this state shares
        with the trace's previous state at the cached price, the rest at full price, the trace's first
        state at full price. Calls the response cache already holds are counted as `cached` and cost
        nothing. `batch`: the teachers asked through a batch API: batch rates, and no prompt-cache hit
        assumed (batches hit it best-effort)."""
        messages, tools = self.request(state)
        out = []
        for teacher in self.split(state)[0]:
            hits = sum(self.cache.get(self.key(teacher, state, s)) is not None for s in range(self.samples))
            tokens = self._planned.predict(teacher, state.trace_id, messages, tools,
                                           self.expected_completion_tokens)
            paid = max(self.samples - hits, 0)
            batched = teacher.name in batch
            if_cached = cost_of(teacher, tokens, batch=True) * paid if batched else None
            if batched:
                tokens = Tokens(tokens.prompt, tokens.completion)
            out.append(Estimate(teacher=teacher.name, model=teacher.model, calls=self.samples, cached=hits,
                                prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
                                cached_prompt_tokens=tokens.cached, batch=batched,
                                cost_usd=cost_of(teacher, tokens, batch=batched) * paid,
                                cost_usd_if_cached=if_cached))
        return out

    def unpriced(self) -> dict[str, str]:
        """Teacher name → why its calls cost 0.0 (no price for a custom endpoint, or none in the map)."""
        return {t.name: reason for t in self.teachers if (reason := unpriced_reason(t))}

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

    def _redacted(self, proposal: Proposal) -> Proposal:
        if self.redact_key is None or proposal.action is None:
            return proposal
        return proposal.model_copy(update={"action": redact_action(proposal.action, self.redact_key)[0]})

    @staticmethod
    def _entry(teacher: TeacherSpec, body: dict[str, Any], sample: int, cost_usd: float) -> CacheEntry:
        """The cache row of an answer; `cost_usd` from its usage (`response_cost`, batch or not)."""
        choices = body.get("choices") or [{}]
        action, error = parse_action(choices[0].get("message") or {})
        tokens = tokens_of(body)
        return CacheEntry(model=teacher.model, sample=sample, response_json=orjson.dumps(body).decode(),
                          action_json=action.model_dump_json() if action else None, error=error,
                          prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
                          cost_usd=cost_usd, created=time.time())

    @staticmethod
    def _proposal(base: dict[str, Any], entry: CacheEntry, counts: TeacherStats, cached: bool) -> Proposal:
        if entry.error:
            counts.invalid += 1
        action = Action.model_validate_json(entry.action_json) if entry.action_json else None
        return Proposal(**base, action=action, error=entry.error, cached=cached,
                        prompt_tokens=entry.prompt_tokens, completion_tokens=entry.completion_tokens,
                        cost_usd=entry.cost_usd)

