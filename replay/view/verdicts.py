"""Each state's verdict, its teachers' groups and the consensus, as the run decided them. Pure.

A run writes every state's verdict to verdicts.jsonl (`replay/decide/verdicts.py`): the viewer reads it
(`stored_decision`) as JSON, beside the state's answers from proposals.jsonl, with no model built.
Runs from before it wrote counts only, so for them the viewer decides again (`decided_again`) from
the run's own answers with the run's own functions: `pool_proposals` (same-family exclusion per state) and
`settle` (the verdict), the way `replay.ablate` recomputes the run's pool, so the overview's counts are
the report's by construction. A `--consensus judge` run's choice needs the judge: its pairs come from
pairs.jsonl and its other answered states are shown as `judged` (agree or abstained, not told apart).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ingestion.schema import Action, Proposal, ToolCall, TraceState

if TYPE_CHECKING:
    from consensus.result import ConsensusResult
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
    """A state's decision as the view draws it: verdicts.jsonl's line and the state's answers as
    proposals.jsonl holds them (JSON data; the groups' `members` index `proposals`)."""

    verdict: str
    proposals: list[dict[str, Any]] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None    # the consensus as verdicts.jsonl stores it

    @property
    def chosen(self) -> dict[str, Any] | None:
        """The consensus action (a judge run: the pair's chosen), when one was reached."""
        result = self.result
        return result.get("action") if result is not None and result.get("reached") else None

    @property
    def match(self) -> str | None:
        """The tier that decided (`exact`, `intent`, ...) where the consensus records one."""
        value = self.result.get("match") if self.result is not None else None
        return str(value) if value else None

    @property
    def winners(self) -> list[str]:
        return list(self.result.get("winner_teachers") or []) if self.result is not None else []


@dataclass
class Decided:
    """A state decided again by the run's own functions (pydantic models, as they take and give)."""

    verdict: str
    proposals: list[Proposal] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    result: ConsensusResult | None = None


def decide_state(state: TraceState, answers: Mapping[str, Sequence[Proposal]], setup: Setup | None,
                 judged_pairs: Mapping[str, dict[str, Any]] | None = None) -> Decided:
    """The state's verdict from the run's answers.

    >>> from teachers.registry import TeacherSpec
    >>> bash = lambda c: Action(tool_calls=[ToolCall(id="1", name="Bash", arguments={"command": c})])
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=bash("ls"), student_model="qwen3")
    >>> answers = {"s": [Proposal(state_id="s", teacher=t, model=t, action=bash("pwd")) for t in "ab"]}
    >>> d = decide_state(s, answers, Setup([TeacherSpec(name=t, model=t) for t in "ab"]))
    >>> d.verdict, d.result.winner_teachers, d.result.action.tool_calls[0].arguments
    ('pair', ['a', 'b'], {'command': 'pwd'})
    >>> decide_state(s, {}, None).verdict
    'not_asked'
    """
    # Deciding needs the run's consensus and teacher code; a run with verdicts.jsonl never imports it.
    from replay.ablation.evaluate import method_decider, pool_proposals
    from replay.decide.states import settle

    if setup is None or not setup.teachers:
        return Decided("not_asked")
    excluded, proposals = pool_proposals(setup.teachers, state, answers, setup.allow_same_family)
    if len(excluded) == len(setup.teachers) or not proposals:
        return Decided("all_teachers_excluded", proposals, excluded)
    if setup.method == "judge":
        return _judged(state, proposals, excluded, judged_pairs or {})
    result = method_decider(setup.method, setup.min_agreement, setup.match)(state, proposals)
    verdict = settle(state, proposals, result, match=setup.match, row=False).verdict
    if verdict == "failed" and not setup.reports_failed:
        verdict = "abstained"          # a run from before the `failed` verdict (C3) counted it so
    return Decided(verdict, proposals, excluded, result)


def stored_decision(record: Mapping[str, Any], proposals: list[dict[str, Any]]) -> Decision:
    """A state's decision as the run stored it in verdicts.jsonl, beside its answers in proposals.jsonl.

    >>> d = stored_decision({"state_id": "s", "verdict": "abstained", "excluded": ["c"], "result": {
    ...     "method": "vote", "reached": False, "groups": []}}, [])
    >>> d.verdict, d.excluded, d.chosen
    ('abstained', ['c'], None)
    """
    result = record.get("result")
    return Decision(str(record["verdict"]), proposals, list(record.get("excluded") or []),
                    result if isinstance(result, dict) else None)


def decided_again(state: TraceState, answers: Mapping[str, Sequence[Proposal]], setup: Setup | None,
                  judged_pairs: Mapping[str, dict[str, Any]] | None = None
                  ) -> tuple[Decision, dict[str, str]]:
    """A state of a run without verdicts.jsonl: decided again (`decide_state`), as the line the run
    would have written (`replay.decide.verdicts.verdict_record`); the decision and the line's answer forms.

    >>> decided_again(TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                          student_action=Action()), {}, None)[0].verdict
    'not_asked'
    """
    from replay.decide.verdicts import verdict_record

    decided = decide_state(state, answers, setup, judged_pairs)
    if setup is None:
        return Decision(decided.verdict), {}
    line = verdict_record(state, decided.verdict, None, decided.result, decided.proposals, decided.excluded)
    return stored_decision(line, [p.model_dump(mode="json") for p in decided.proposals]), line["forms"]


def _judged(state: TraceState, proposals: list[Proposal], excluded: list[str],
            pairs: Mapping[str, dict[str, Any]]) -> Decided:
    from consensus.result import ConsensusResult

    row = pairs.get(state.state_id)
    if row is None:
        return Decided("judged", proposals, excluded)
    chosen = action_of((row.get("chosen") or [{}])[0])
    result = ConsensusResult(method="judge", reached=True, action=chosen,
                             agreement=float(row.get("agreement") or 0.0),
                             teachers=list(row.get("teachers") or []),
                             winner_teachers=list(row.get("winner_teachers") or []))
    return Decided("pair", proposals, excluded, result)


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
