"""Each state's verdict, its teachers' groups and the consensus, as the run decided them. Pure.

A run writes every state's verdict to verdicts.jsonl (`replay/verdicts.py`): the viewer reads it
(`stored_decision`). Runs from before it wrote counts only, so for them the viewer decides again from
the run's own answers with the run's own functions: `pool_proposals` (same-family exclusion per state) and
`settle` (the verdict), the way `replay.ablate` recomputes the run's pool, so the overview's counts are
the report's by construction. A `--consensus judge` run's choice needs the judge: its pairs come from
pairs.jsonl and its other answered states are shown as `judged` (agree or abstained, not told apart).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from consensus.result import ConsensusResult
from ingestion.schema import Action, Proposal, ToolCall, TraceState
from replay.ablation.evaluate import method_decider, pool_proposals
from replay.decide import settle
from replay.verdicts import stored_result
from teachers.registry import TeacherSpec

# Every state is exactly one of these (DESIGN.md); `judged` and `not_asked` are the viewer's own.
# `unselected`: left out by --select, never asked (report.json `states_unselected`).
VERDICTS = ("pair", "agree", "abstained", "failed", "all_teachers_excluded", "unselected", "judged",
            "not_asked")
REPORT_KEYS = {"pair": ("pairs",), "agree": ("agree",), "abstained": ("consensus", "abstained"),
               "failed": ("states_failed",), "all_teachers_excluded": ("states_all_teachers_excluded",),
               "unselected": ("states_unselected",)}


@dataclass
class Setup:
    """What deciding needs from the run's settings."""

    teachers: list[TeacherSpec]
    method: str = "vote"
    min_agreement: float = 0.5
    match: str = "intent"
    allow_same_family: bool = False
    reports_failed: bool = False       # the run counts `failed` states (report.json has states_failed)


@dataclass
class Decision:
    verdict: str
    proposals: list[Proposal] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    result: ConsensusResult | None = None
    chosen: Action | None = None       # the consensus action (a judge run: the pair's chosen)

    @property
    def match(self) -> str | None:
        """The tier that decided (`exact`, `intent`, ...) where the consensus records one."""
        value = getattr(self.result, "match", None) if self.result is not None else None
        return str(value) if value else None

    @property
    def winners(self) -> list[str]:
        return list(self.result.winner_teachers) if self.result is not None else []


def decide_state(state: TraceState, answers: Mapping[str, Sequence[Proposal]], setup: Setup | None,
                 judged_pairs: Mapping[str, dict[str, Any]] | None = None) -> Decision:
    """The state's verdict from the run's answers.

    >>> from teachers.registry import TeacherSpec
    >>> bash = lambda c: Action(tool_calls=[ToolCall(id="1", name="Bash", arguments={"command": c})])
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=bash("ls"), student_model="qwen3")
    >>> answers = {"s": [Proposal(state_id="s", teacher=t, model=t, action=bash("pwd")) for t in "ab"]}
    >>> d = decide_state(s, answers, Setup([TeacherSpec(name=t, model=t) for t in "ab"]))
    >>> d.verdict, d.winners, d.chosen.tool_calls[0].arguments
    ('pair', ['a', 'b'], {'command': 'pwd'})
    >>> decide_state(s, {}, None).verdict
    'not_asked'
    """
    if setup is None or not setup.teachers:
        return Decision("not_asked")
    excluded, proposals = pool_proposals(setup.teachers, state, answers, setup.allow_same_family)
    if len(excluded) == len(setup.teachers) or not proposals:
        return Decision("all_teachers_excluded", proposals, excluded)
    if setup.method == "judge":
        return _judged(state, proposals, excluded, judged_pairs or {})
    result = method_decider(setup.method, setup.min_agreement, setup.match)(state, proposals)
    verdict = settle(state, proposals, result, match=setup.match, row=False).verdict
    if verdict == "failed" and not setup.reports_failed:
        verdict = "abstained"          # a run from before the `failed` verdict (C3) counted it so
    return Decision(verdict, proposals, excluded, result, result.action if result.reached else None)


def stored_decision(record: Mapping[str, Any], answers: Mapping[str, Sequence[Proposal]]) -> Decision:
    """A state's decision as the run stored it in verdicts.jsonl (its proposals from proposals.jsonl).

    >>> d = stored_decision({"state_id": "s", "verdict": "abstained", "excluded": ["c"], "result": {
    ...     "method": "vote", "reached": False, "groups": []}}, {})
    >>> d.verdict, d.excluded, d.chosen
    ('abstained', ['c'], None)
    """
    result = stored_result(record)
    chosen = result.action if result is not None and result.reached else None
    return Decision(str(record["verdict"]), list(answers.get(record["state_id"], ())),
                    list(record.get("excluded") or []), result, chosen)


def _judged(state: TraceState, proposals: list[Proposal], excluded: list[str],
            pairs: Mapping[str, dict[str, Any]]) -> Decision:
    row = pairs.get(state.state_id)
    if row is None:
        return Decision("judged", proposals, excluded)
    chosen = action_of((row.get("chosen") or [{}])[0])
    result = ConsensusResult(method="judge", reached=True, action=chosen,
                             agreement=float(row.get("agreement") or 0.0),
                             teachers=list(row.get("teachers") or []),
                             winner_teachers=list(row.get("winner_teachers") or []))
    return Decision("pair", proposals, excluded, result, chosen)


def action_of(message: dict[str, Any]) -> Action:
    """An assistant message of a dataset row back into an Action.

    >>> action_of({"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
    ...     "function": {"name": "Bash", "arguments": {"command": "ls"}}}]}).tool_calls[0].name
    'Bash'
    """
    calls = [ToolCall(id=str(call.get("id") or i), name=call["function"]["name"],
                      arguments=call["function"].get("arguments") or {})
             for i, call in enumerate(message.get("tool_calls") or [])]
    return Action(content=message.get("content") or "", tool_calls=calls)


def report_count(report: Mapping[str, Any], verdict: str) -> int | None:
    """What report.json says about a verdict; None when it has no such key.

    >>> report_count({"consensus": {"abstained": 2}}, "abstained"), report_count({}, "failed")
    (2, None)
    """
    value: Any = report
    for key in REPORT_KEYS.get(verdict, ("-",)):
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return int(value)
