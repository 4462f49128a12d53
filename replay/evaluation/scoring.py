"""What an answer is measured against at a state (its `Yardstick`), and the scores of one answer. Pure.

Every comparison is the run's own: `consensus.methods.student_match` (the comparison every verdict
makes: `exact` = the same canonical action, `intent` = the same intent key, exact included), in the
state's context (cwd and history), and `consensus.validity.invalid_reason` (the screen every teacher
answer passes before it may vote).

Scores, each 1, 0, or None where it does not apply:
- `valid`: the answer parses (tool arguments a JSON object, not empty), names tools the state offers and
  gives each tool's required arguments. Over every answered state. Prose is valid (a teacher may answer
  without a tool), so a student that never calls a tool scores 1 here:
- `tool_call`: the answer is a valid call of an offered tool (valid, with at least one tool call). Over
  every answered state.
- `consensus_exact` / `consensus_intent`: the answer is the teachers' consensus (verdicts.jsonl). Over
  the states where the run reached one.
- `student_exact` / `student_intent`: the answer repeats the student's own action. Over every answered
  state.
- `recovery_exact` / `recovery_intent`: at a failed state (error, rejected, interrupted) whose next turn
  corrected it, the answer is that correction. Over those states.
An invalid answer scores 0 on every comparison (like a teacher's, it would be no vote). A call that
failed (network, budget) is no answer: None everywhere, counted apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from consensus.intent_rules import IntentContext
from consensus.methods import student_match
from consensus.result import ConsensusResult
from consensus.validity import invalid_reason
from ingestion.outcome import is_failed
from ingestion.schema import Action, Proposal, TraceState

METRICS = ("consensus_exact", "consensus_intent", "student_exact", "student_intent", "recovery_exact",
           "recovery_intent", "valid", "tool_call")
# What each figure says, for the table and the JSON.
MEANINGS = {
    "consensus_exact": "the teachers' consensus, canonically the same action",
    "consensus_intent": "the teachers' consensus's intent (exact matches included)",
    "student_exact": "repeats the student's own action, canonically",
    "student_intent": "has the student's own action's intent",
    "recovery_exact": "at a failed state, the student's own correction, canonically",
    "recovery_intent": "at a failed state, the student's own correction's intent",
    "valid": "a valid answer: parses, names a tool the state offers, required arguments present (prose "
             "is valid)",
    "tool_call": "a valid call of an offered tool (prose is not one)",
}
# Answers that came back but do not parse (teachers.client.parse_action): invalid, not failed.
UNPARSED = ("invalid_tool_arguments", "empty_response")

Scores = dict[str, int | None]


@dataclass
class Yardstick:
    """A held-out state and what an answer there is compared with."""

    state_id: str
    trace_id: str
    cwd: str | None
    context: IntentContext
    tools: list[dict[str, Any]]
    student: Action
    consensus: ConsensusResult | None   # None: the run reached none here
    recovery: Action | None             # the student's correction, at a failed state that has one


def yardstick(state: TraceState, consensus: ConsensusResult | None, recovery: Action | None) -> Yardstick:
    """The state's yardstick; a consensus that was not reached, or a recovery of a state that did not
    fail, is none."""
    reached = consensus if consensus is not None and consensus.reached and consensus.action else None
    failed = is_failed(state.metadata.get("outcome"))
    cwd = state.metadata.get("cwd")
    return Yardstick(state_id=state.state_id, trace_id=state.trace_id, cwd=cwd,
                     context=IntentContext(cwd, state.messages), tools=state.tools,
                     student=state.student_action, consensus=reached,
                     recovery=recovery if failed else None)


def answered(proposal: Proposal) -> bool:
    """Whether the model answered (an action, or one that does not parse), as opposed to a failed call.

    >>> answered(Proposal(state_id="s", teacher="m", model="m", error="empty_response"))
    True
    >>> answered(Proposal(state_id="s", teacher="m", model="m", error="timeout: slow"))
    False
    """
    return proposal.action is not None or (proposal.error or "").startswith(UNPARSED)


def score(proposal: Proposal, stick: Yardstick) -> Scores:
    """The answer's scores at its state (see the module's docstring).

    >>> from ingestion.schema import ToolCall
    >>> ls = Action(tool_calls=[ToolCall(id="1", name="Bash", arguments={"command": "ls"})])
    >>> tools = [{"type": "function", "function": {"name": "Bash", "parameters": {"required": ["command"]}}}]
    >>> stick = Yardstick("s", "t", "/r", IntentContext("/r"), tools, ls, None, None)
    >>> got = score(Proposal(state_id="s", teacher="m", model="m", action=ls), stick)
    >>> got["valid"], got["tool_call"], got["student_exact"], got["consensus_exact"], got["recovery_intent"]
    (1, 1, 1, None, None)
    >>> prose = score(Proposal(state_id="s", teacher="m", model="m", action=Action(content="Done.")), stick)
    >>> prose["valid"], prose["tool_call"]
    (1, 0)
    """
    if not answered(proposal):
        return dict.fromkeys(METRICS)
    action = proposal.action
    valid = action is not None and (not stick.tools or invalid_reason(action, stick.tools) is None)
    calls = valid and action is not None and bool(action.tool_calls)
    out: Scores = {"valid": int(valid), "tool_call": int(calls)}
    consensus = stick.consensus
    targets = (("consensus", consensus),
               ("student", ConsensusResult(method="student", reached=True, action=stick.student)),
               ("recovery", ConsensusResult(method="recovery", reached=True, action=stick.recovery)
                if stick.recovery is not None else None))
    for name, target in targets:
        tier = student_match(action, target, stick.cwd, "intent", stick.context) \
            if target is not None and valid and action is not None else None
        out[f"{name}_exact"] = None if target is None else int(tier == "exact")
        out[f"{name}_intent"] = None if target is None else int(tier in ("exact", "intent"))
    return {metric: out[metric] for metric in METRICS}
