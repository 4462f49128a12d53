"""One state's answers: every eligible teacher at once, or one at a time with --early-stop."""

from __future__ import annotations

from dataclasses import dataclass

from consensus.canonical import canonical
from consensus.early_stop import decided, order_by_cost
from consensus.intent import intent_of
from consensus.intent_rules import IntentContext
from consensus.validity import screen
from ingestion.schema import Proposal, TraceState
from teachers.cost import call_cost, estimate
from teachers.pool import TeacherPool

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
