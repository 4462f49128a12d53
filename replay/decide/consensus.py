"""One state's consensus: the method named by --consensus, or the LLM judge that picks among proposals."""

from __future__ import annotations

from consensus.judge import build_judge_messages, judge_result, parse_judge_reply
from consensus.methods import run_method
from consensus.result import ConsensusResult
from ingestion.schema import Proposal, TraceState
from replay.ask.answers import context_of
from replay.options import ConsensusOptions
from teachers.cache import CacheEntry, ResponseCache, cache_key
from teachers.client import complete
from teachers.cost import response_cost, usage
from teachers.pool import TeacherPool
from teachers.registry import TeacherSpec
from teachers.workers import blocking

JUDGE_PROMPT_VERSION = "judge-v1"


class Judge:
    """`--consensus judge`: one LLM picks among the distinct proposals, blind to who wrote them.

    Its calls go through the same cache as the teachers', so a re-run never pays twice."""

    def __init__(self, spec: TeacherSpec, cache: ResponseCache, pool: TeacherPool) -> None:
        self.spec, self.cache, self.pool = spec, cache, pool
        self.calls = {"made": 0, "cached": 0, "failed": 0}
        self.cost_usd = 0.0

    async def decide(self, state: TraceState, proposals: list[Proposal]) -> ConsensusResult:
        cwd = state.metadata.get("cwd")
        valid = [p for p in proposals if p.action is not None]
        messages, order = build_judge_messages(state.messages, valid, seed=state.state_id, cwd=cwd)
        if len(order) <= 1:  # one distinct answer: nothing to judge
            return judge_result(valid, order[0] if order else None, cwd)
        text = await self._ask(messages)
        return judge_result(valid, parse_judge_reply(text, order), cwd)

    async def _ask(self, messages: list[dict]) -> str | None:
        key = cache_key(self.spec.model, self.spec.params, messages, [], 0, JUDGE_PROMPT_VERSION)
        entry = await blocking(self.cache.get, key)  # SQLite off the event loop
        if entry is not None:
            self.calls["cached"] += 1
            return entry.response_json
        try:
            body = await complete(self.spec, messages, [], timeout=self.pool.timeout, policy=self.pool.retry)
        except Exception:  # a failed judgement abstains; it never fails the run
            self.calls["failed"] += 1
            return None
        text = ((body.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        prompt_tokens, completion_tokens = usage(body)
        cost = response_cost(self.spec, body)  # its usage, cached input at the cached price
        await blocking(self.cache.put, key, CacheEntry(model=self.spec.model, response_json=text,
                                                       prompt_tokens=prompt_tokens,
                                                       completion_tokens=completion_tokens, cost_usd=cost))
        self.calls["made"] += 1
        self.cost_usd += cost
        return text


async def decide(state: TraceState, proposals: list[Proposal], options: ConsensusOptions,
                 judge: Judge | None) -> ConsensusResult:
    if options.method == "judge" and judge is not None:
        return await judge.decide(state, proposals)
    return run_method(options.method, proposals, state.metadata.get("cwd"), options.min_agreement,
                      options.match, context_of(state))
