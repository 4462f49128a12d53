"""The teacher pool: every eligible teacher answers a state, concurrently, cached, within a budget.

One event loop; a semaphore per teacher plus a global one bound the calls in flight (the teacher's is
taken first, so a task queued for a busy teacher holds no global slot another teacher could use).
The loop only schedules: building a state's request, cache keys and reads, the calls themselves and
the storing of their answers run on worker threads (`teachers.workers`).

Failure semantics: a call that fails after retries becomes `Proposal(error=...)`, counted, never
cached (a re-run asks again); a malformed answer is asked again within the retry policy and, if it
stays malformed, is `invalid` for this run only; a cache fault is no call failure: `CacheError`
propagates and stops the run. A call another run (sharing the cache) has in flight is waited for.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any

import orjson

from ingestion.schema import Proposal, TraceState
from teachers.answer import answer_entry, to_proposal
from teachers.breaker import Breaker, Unreachable
from teachers.cache import CacheEntry, CacheError, ResponseCache, cache_key
from teachers.client import MalformedAnswer, RetryPolicy, complete, describe_error
from teachers.cost import Estimate, Tokens, cost_of, response_cost, tokens_of, unpriced_reason
from teachers.learned import Completion, learned, priors
from teachers.prompt_cache import PrefixModel, cache_rules
from teachers.pseudonyms import Pseudonyms
from teachers.ratelimit import Limiter, request_tokens
from teachers.redact_state import redact_action
from teachers.registry import TeacherSpec, split_by_family
from teachers.request import build_request, call_options
from teachers.spend import Spend, worst_case
from teachers.stats import PoolStats, TeacherStats
from teachers.workers import blocking

# Bump when the way a state becomes a request changes, so old cache rows stop matching.
PROMPT_VERSION = "teachers-v1"
BUDGET_EXHAUSTED = "budget_exhausted"
_REQUEST_MEMO = 64  # states whose built request is kept: one state is asked by every teacher x sample
_POLL = 0.25  # seconds between looks at a call another run has in flight (SQLite cannot notify)


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
                 redact_key: bytes | None = None, adaptive: bool = True, breaker_threshold: int = 5) -> None:
        self.teachers = list(teachers)
        self.cache = cache if cache is not None else ResponseCache()
        self.concurrency, self.per_teacher = max(concurrency, 1), max(per_teacher, 1)
        self.timeout, self.samples, self.max_cost = timeout, max(samples, 1), max_cost
        self.allow_same_family = allow_same_family
        self.max_response_bytes = max_response_bytes
        # Answers are redacted like the states they answer (None: --no-redact), so no output holds a
        # secret-shaped string a teacher wrote either.
        self.redact_key = redact_key
        # Set by the run (replay.pipeline): personal data in answers to the states' placeholders.
        self.pseudonyms: Pseudonyms | None = None
        self.retry = retry or RetryPolicy()
        self.prompt_version = prompt_version
        self.expected_completion_tokens = expected_completion_tokens
        self.stats = PoolStats()
        self.spend = Spend(max_cost)
        # Pacing per teacher (teachers.ratelimit; off: fixed concurrency at the ceilings) and the
        # circuit breaker that stops a teacher whose endpoint refuses connections (teachers.breaker).
        self.adaptive = adaptive
        self.limiters: dict[str, Limiter] = {}
        self.breaker = Breaker(breaker_threshold)
        self.batched: dict[str, bool] = {}  # keys a provider batch answered in this run: paid now, not cached
        self._live = PrefixModel()       # the prompt cache as the calls of this run meet it (reservations)
        self._planned = PrefixModel()    # the same for a dry run's estimate
        self._waved = PrefixModel()      # and for the dry run's --trace-parallel figures
        self._waved._tokens = self._planned._tokens  # token counts shared: counted once per message
        self._completions: dict[str, Completion] = {}  # the estimate's completion tokens, per teacher
        self._requests: OrderedDict[str, tuple[TraceState, list[dict[str, Any]], list[dict[str, Any]]]] = \
            OrderedDict()
        self._memo_lock = threading.Lock()  # requests are built on worker threads
        self._building: dict[str, tuple[TraceState, asyncio.Future]] = {}
        self._asking: dict[str, asyncio.Future] = {}  # cache key -> this process's call in flight
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
        as they are. Thread-safe; the async side builds each state once (`_request`)."""
        with self._memo_lock:
            memo = self._requests.get(state.state_id)
            if memo is not None and memo[0] is state:
                self._requests.move_to_end(state.state_id)
                return memo[1], memo[2]
        messages, tools = build_request(state)
        with self._memo_lock:
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
        """One teacher's answer: from the cache if it is there, else one call (with retries).
        Never raises for a failed call; raises `CacheError` when the cache fails."""
        base = {"state_id": state.state_id, "teacher": teacher.name, "model": teacher.model,
                "family": teacher.family, "sample": sample}
        counts = self.stats.teacher(teacher.name)
        messages, tools = await self._request(state)
        key = await blocking(cache_key, teacher.model, teacher.params, messages, tools, sample,
                             self.prompt_version)
        waited = False
        while True:
            if (entry := await blocking(self.cache.get, key)) is not None:
                if self.batched.pop(key, None) is not None:  # this run's batch paid for it
                    self._count_made(counts, entry, tokens_of(orjson.loads(entry.response_json or "{}")),
                                     batched=True)
                    return await blocking(self._redacted, to_proposal(base, entry, cached=False))
                counts.cached += 1
                counts.waited += waited
                return await blocking(self._redacted, to_proposal(base, entry, cached=True))
            if (other := self._asking.get(key)) is not None:  # the same call, asked by this run
                await asyncio.wait([other])
                waited = True
                continue
            done = self._asking[key] = asyncio.get_running_loop().create_future()
            try:
                proposal = await self._call(teacher, state, key, messages, tools, base, counts)
            finally:
                del self._asking[key]
                done.set_result(None)
            if proposal is not None:
                return proposal
            await self._await_other_run(key)
            waited = True

    async def _call(self, teacher: TeacherSpec, state: TraceState, key: str, messages: list[dict[str, Any]],
                    tools: list[dict[str, Any]], base: dict[str, Any],
                    counts: TeacherStats) -> Proposal | None:
        """This run's call, under the semaphores, a lease and a budget reservation; None when another
        run holds the lease or has just stored the answer (the caller looks again)."""
        if self.breaker.is_open(teacher.name):  # stopped: fail at once, no place in line
            counts.failed += 1
            counts.unreachable += 1
            return Proposal(**base, error=self.breaker.reason(teacher.name))
        expected, worst = self._reservation(teacher, state, messages, tools)
        total, mine = self._semaphores(teacher.name)
        async with mine, total:
            if await blocking(self.cache.lease, key) != "mine":
                return None
            held = await self.spend.reserve(expected, worst)
            if held is None:
                await blocking(self.cache.release, key)
                counts.budget_exhausted += 1
                return Proposal(**base, error=BUDGET_EXHAUSTED)
            paid = [0.0]  # every answer this call was sent, malformed ones asked again included
            options = call_options(teacher.model, teacher.api_base, state.trace_id)
            limiter = self._limiter(teacher.name)
            weight = await blocking(request_tokens, messages, tools, teacher.params) if limiter else 0.0
            try:
                entry, tokens = await complete(
                    teacher, messages, tools, timeout=self.timeout, policy=self.retry,
                    on_retry=lambda error: self._retried(error, counts, paid),
                    accept=lambda body: self._accept(teacher, key, base["sample"], body),
                    max_response_bytes=self.max_response_bytes, options=options,
                    limiter=limiter, weight=weight, breaker=self.breaker)
                paid[0] += entry.cost_usd
            except CacheError:
                raise
            except Exception as error:  # one teacher failing never fails a run
                await blocking(self.cache.release, key)
                if isinstance(error, MalformedAnswer):  # answered, paid for, unusable: not stored
                    bad, bad_tokens = error.entry
                    paid[0] += bad.cost_usd
                    counts.invalid += 1
                    self._count_made(counts, bad, bad_tokens)
                    return Proposal(**base, error=error.reason, prompt_tokens=bad.prompt_tokens,
                                    completion_tokens=bad.completion_tokens, cost_usd=bad.cost_usd)
                counts.failed += 1
                counts.unreachable += isinstance(error, Unreachable)
                return Proposal(**base, error=describe_error(error, teacher))
            finally:
                await self.spend.settle(held, paid[0])
                if limiter is not None:
                    counts.rate_limited = limiter.rate_limited
                    counts.tokens_per_minute = limiter.report()["tokens_per_minute"]
        self._count_made(counts, entry, tokens)
        return await blocking(self._redacted, to_proposal(base, entry, cached=False))

    async def _request(self, state: TraceState) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """`request(state)` built once on a worker thread, however many teachers x samples ask."""
        building = self._building.get(state.state_id)
        if building is None or building[0] is not state:
            future = asyncio.ensure_future(blocking(self.request, state))
            building = self._building[state.state_id] = (state, future)
            future.add_done_callback(lambda _: self._building.pop(state.state_id, None)
                                     if self._building.get(state.state_id) is building else None)
        return await asyncio.shield(building[1])

    async def _await_other_run(self, key: str) -> None:
        """Until the run holding `key`'s lease stores its answer, gives the lease back, or dies."""
        while await blocking(self.cache.lease_state, key) == "busy":
            await asyncio.sleep(_POLL)

    def _reservation(self, teacher: TeacherSpec, state: TraceState, messages: list[dict[str, Any]],
                     tools: list[dict[str, Any]]) -> tuple[float, float]:
        """(expected, worst) USD of the call about to be sent; (0, 0) without a cap (nothing to reserve)."""
        if self.spend.cap is None:
            return 0.0, 0.0
        tokens = self._live.predict(teacher, state.trace_id, messages, tools, self.expected_completion_tokens)
        return cost_of(teacher, tokens), worst_case(teacher, tokens.prompt)

    @staticmethod
    def _count_made(counts: TeacherStats, entry: CacheEntry, tokens: Tokens, batched: bool = False) -> None:
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
        self.cache.put(key, answer_entry(teacher, body, sample, response_cost(teacher, body, batch=True)))
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
            completion = self.completion(teacher)
            tokens = self._planned.predict(teacher, state.trace_id, messages, tools, completion.mean)
            paid = max(self.samples - hits, 0)
            batched = teacher.name in batch
            if_cached = cost_of(teacher, tokens, batch=True) * paid if batched else None
            if batched:
                tokens = Tokens(tokens.prompt, tokens.completion)
            prompt_usd = cost_of(teacher, Tokens(tokens.prompt, 0, tokens.cached, tokens.cache_write),
                                 batch=batched)
            low, high = (prompt_usd * factor + cost_of(teacher, Tokens(0, n), batch=batched)
                         for factor, n in ((priors()["prompt_low"], completion.low),
                                           (priors()["prompt_high"], completion.high)))
            out.append(Estimate(teacher=teacher.name, model=teacher.model, calls=self.samples, cached=hits,
                                prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
                                cached_prompt_tokens=tokens.cached, batch=batched,
                                cost_usd=cost_of(teacher, tokens, batch=batched) * paid,
                                cost_usd_if_cached=if_cached, cost_usd_low=low * paid,
                                cost_usd_high=high * paid))
        return out

    def estimate_wave(self, state: TraceState, new_wave: bool) -> float:
        """Dry run, `--trace-parallel`: USD of this state's calls not yet cached when it is sent in a wave
        (`new_wave`: it starts one, after the wave before was answered). Call in turn order."""
        messages, tools = self.request(state)
        usd = 0.0
        for teacher in self.split(state)[0]:
            if new_wave:
                self._waved.start_wave(teacher, state.trace_id)
            hits = sum(self.cache.get(self.key(teacher, state, s)) is not None for s in range(self.samples))
            tokens = self._waved.predict(teacher, state.trace_id, messages, tools,
                                         self.completion(teacher).mean, remember=False)
            usd += cost_of(teacher, tokens) * max(self.samples - hits, 0)
        return usd

    def completion(self, teacher: TeacherSpec) -> Completion:
        """Completion tokens per call this teacher is expected to answer with (teachers.learned): from
        its answers in the cache, else the prior; read once per run."""
        if teacher.name not in self._completions:
            self._completions[teacher.name] = learned(teacher, self.cache.path)
        return self._completions[teacher.name]

    def cached_price_ratio(self) -> float:
        """The lowest cached-to-full prompt price among the teachers (what asking a trace's states
        together, in waves, risks most on): 1.0 for a provider without a prompt cache, 0.1 (the usual
        discount) for an unpriced one."""
        ratios = []
        for teacher in self.teachers:
            full = cost_of(teacher, Tokens(1_000_000, 0))
            if full <= 0:  # unpriced: a custom server, most of which (vLLM, SGLang) cache prefixes
                ratios.append(0.1)
            elif cache_rules(teacher) is None:
                ratios.append(1.0)
            else:
                ratios.append(cost_of(teacher, Tokens(1_000_000, 0, cached=1_000_000)) / full)
        return min(ratios, default=0.1)

    def unpriced(self) -> dict[str, str]:
        """Teacher name → why its calls cost 0.0 (no price for a custom endpoint, or none in the map)."""
        return {t.name: reason for t in self.teachers if (reason := unpriced_reason(t))}

    # --- helpers -----------------------------------------------------------------------------------

    def _limiter(self, teacher: str) -> Limiter | None:
        if not self.adaptive:
            return None
        if teacher not in self.limiters:
            self.limiters[teacher] = Limiter(min(self.per_teacher, self.concurrency))
        return self.limiters[teacher]

    def pacing(self) -> dict[str, dict[str, Any]]:
        """Per teacher: achieved tokens per minute, 429s, the window it ended at, the limits providers
        stated (report.json `rate_limits`)."""
        return {name: limiter.report() for name, limiter in sorted(self.limiters.items())}

    def _semaphores(self, teacher: str) -> tuple[asyncio.Semaphore, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a semaphore is bound to the loop it first waited on
            self._loop = loop
            self._global = asyncio.Semaphore(self.concurrency)
            self._per = {}
        if teacher not in self._per:
            self._per[teacher] = asyncio.Semaphore(self.per_teacher)
        return self._global, self._per[teacher]

    def _accept(self, teacher: TeacherSpec, key: str, sample: int,
                body: dict[str, Any]) -> tuple[CacheEntry, Tokens]:
        """On the worker thread, the moment an answer arrives: parse it, and store it if it is one."""
        entry = answer_entry(teacher, body, sample, response_cost(teacher, body))
        if entry.error:
            raise MalformedAnswer(entry.error, (entry, tokens_of(body)))
        self.cache.put(key, entry)  # committed before the loop hears of it: a killed run keeps it
        return entry, tokens_of(body)

    def _retried(self, error: BaseException | None, counts: TeacherStats, paid: list[float]) -> None:
        counts.retries += 1
        if isinstance(error, MalformedAnswer):  # a bad answer is still a paid one
            entry, tokens = error.entry
            self._count_made(counts, entry, tokens)
            paid[0] += entry.cost_usd

    def _redacted(self, proposal: Proposal) -> Proposal:
        """The answer redacted like the state it answers (a regex pass: run on a worker thread)."""
        if (self.redact_key is None and self.pseudonyms is None) or proposal.action is None:
            return proposal
        action = redact_action(proposal.action, self.redact_key, self.pseudonyms)[0]
        return proposal.model_copy(update={"action": action})

