"""One state's answers: every eligible teacher at once, or one at a time with --early-stop; the judge."""

from __future__ import annotations

from dataclasses import dataclass

from consensus.canonical import canonical
from consensus.early_stop import decided, order_by_cost
from consensus.intent import intent_of
from consensus.intent_rules import IntentContext
from consensus.judge import build_judge_messages, judge_result, parse_judge_reply
from consensus.methods import run_method
from consensus.result import ConsensusResult
from consensus.validity import screen
from ingestion.schema import Proposal, TraceState
from replay.options import ConsensusOptions
from teachers.cache import CacheEntry, ResponseCache, cache_key
from teachers.client import complete
from teachers.cost import call_cost, estimate, response_cost, usage
from teachers.pool import TeacherPool
from teachers.registry import TeacherSpec

JUDGE_PROMPT_VERSION = "judge-v1"
_NOMINAL_TOKENS = 1_000  # for ranking teachers by price; only the order matters


@dataclass
class Answers:
    proposals: list[Proposal]
    calls_saved: int = 0
    usd_saved: float = 0.0


def context_of(state: TraceState) -> IntentContext:
    """What the intent tier needs to know about a state: its cwd and history."""
    return IntentContext(state.metadata.get("cwd"), state.messages)


def _vote_key(proposal: Proposal, state: TraceState, match: str, context: IntentContext) -> str | None:
    if proposal.action is None:
        return None
    form = canonical(proposal.action, state.metadata.get("cwd"))
    return intent_of(form, context) if match == "intent" else form


async def ask_state(pool: TeacherPool, state: TraceState, early_stop: bool, min_agreement: float,
                    match: str = "intent") -> Answers:
    """The teachers' proposals for a state (none when every teacher is of the student's family), each
    screened against the state's tools (`consensus.validity`): an invalid one is no vote.

    With early stop the outcome is settled on the loosest tier in use: once the intent tier's winner
    (or abstention) is certain, the rest are not asked (which of the winner's spellings speaks for it
    may then differ from a full run's, never its intent)."""
    if not early_stop:
        return Answers(screen(await pool.propose(state), state.tools))
    eligible = pool.eligible(state)
    if not eligible:
        return Answers([])
    by_name = {t.name: t for t in eligible}
    ordered = [by_name[n] for n in order_by_cost(
        list(by_name), lambda n: call_cost(by_name[n], _NOMINAL_TOKENS, _NOMINAL_TOKENS))]
    context = context_of(state)
    proposals: list[Proposal] = []
    votes: list[str | None] = []
    for asked, teacher in enumerate(ordered, 1):
        proposal = screen([await pool.ask(teacher, state, 0)], state.tools)[0]
        proposals.append(proposal)
        votes.append(_vote_key(proposal, state, match, context))
        if decided(votes, len(ordered) - asked, min_agreement):
            break
    skipped = ordered[len(proposals):]
    messages, tools = pool.request(state)
    usd = sum(estimate(t, messages, tools, pool.expected_completion_tokens).cost_usd for t in skipped)
    return Answers(proposals, calls_saved=len(skipped), usd_saved=usd)


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
        entry = self.cache.get(key)
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
        self.cache.put(key, CacheEntry(model=self.spec.model, response_json=text, prompt_tokens=prompt_tokens,
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
