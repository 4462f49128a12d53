"""The view's pages as template contexts: an overview, the list, one page per state. Pure.

`render.py` turns these into files; nothing here touches the disk.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ingestion.schema import TraceState
from replay.view.content import RECENT, call_diff, cut, shown_action
from replay.view.context import Context
from replay.view.index import Index
from replay.view.load import RunOutputs
from replay.view.verdicts import VERDICTS, Decision, report_count

ALWAYS_SHOWN = ("pair", "agree", "abstained", "failed", "all_teachers_excluded")


@dataclass
class RunInfo:
    """The header every page shows."""

    name: str
    folder: str
    states: int = 0
    traces: int = 0
    teachers: str | None = None
    method: str = "vote"
    command: str = ""


def state_page(state: TraceState, decision: Decision, context: Context, prev: str | None,
               next_: str | None) -> dict[str, Any]:
    """The template context of one state's page (its messages are drawn from `context`'s data files).

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", student_action=Action(
    ...     content="<script>x</script>"), messages=[{"role": "system", "content": "sys"}],
    ...     metadata={"outcome": {"kind": "error", "calls": [{"name": "Bash", "error": "exit 1"}]}})
    >>> page = state_page(s, Decision("not_asked"), Context([[0, 1]], True, 0, ["t0-0.js"]), None, "1.html")
    >>> page["student"].text, page["next"], page["groups"], page["outcome"], page["ranges"]
    ('<script>x</script>', '1.html', [], 'error', '[[0,1]]')
    """
    outcome = state.metadata.get("outcome") if isinstance(state.metadata, dict) else None
    outcome = outcome if isinstance(outcome, dict) else {}
    student = shown_action(state.student_action, note=state.student_model or "")
    chosen = shown_action(decision.chosen, note=", ".join(decision.winners)) if decision.chosen else None
    return {
        "state": state, "decision": decision, "student": student, "chosen": chosen,
        "student_thinking": cut(state.student_action.thinking or ""),
        "diff": call_diff(decision.chosen, state.student_action) if decision.chosen else [],
        "groups": groups(decision), "failed": [shown_action(None, _who(p), p.error)
                                               for p in decision.proposals if p.action is None],
        "excluded": decision.excluded, "context": context, "recent": RECENT,
        "ranges": json.dumps(context.ranges, separators=(",", ":")), "prev": prev, "next": next_,
        "outcome": outcome.get("kind"), "outcome_calls": [c for c in outcome.get("calls") or []
                                                          if isinstance(c, dict) and c.get("error")],
        "recovery": state.metadata.get("recovery") if isinstance(state.metadata, dict) else None,
    }


def groups(decision: Decision) -> list[dict[str, Any]]:
    """The proposals as the consensus grouped them, winner first; without a consensus result (a judge
    run's undecided states) each teacher's answer is its own group.

    >>> from ingestion.schema import Action, Proposal
    >>> p = [Proposal(state_id="s", teacher=t, model=t, action=Action(content="x")) for t in "ab"]
    >>> [(g["teachers"], g["winner"]) for g in groups(Decision("judged", p))]
    [(['a'], False), (['b'], False)]
    """
    proposals = decision.proposals
    result = decision.result
    if result is None or not result.groups:
        return [{"teachers": [p.teacher], "weight": 1.0, "winner": False,
                 "members": [shown_action(p.action, _who(p))]} for p in proposals if p.action is not None]
    return [{"teachers": group.teachers, "weight": group.weight,
             "winner": result.reached and index == 0,
             "members": [shown_action(proposals[i].action, _who(proposals[i])) for i in group.members
                         if i < len(proposals)]}
            for index, group in enumerate(result.groups)]


def _who(proposal: Any) -> str:
    sample = f" #{proposal.sample}" if proposal.sample else ""
    cached = " (cached)" if proposal.cached else ""
    return f"{proposal.teacher}{sample}{cached}"


def overview_page(run: RunOutputs, index: Index, matrix: Any, plot: str | None) -> dict[str, Any]:
    """The context of index.html: verdict counts beside report.json's, teachers, cost, agreement, ablation."""
    report = run.report
    verdicts = []
    for name in VERDICTS:
        count, reported = index.verdicts.get(name, 0), report_count(report, name)
        if count or reported or (name in ALWAYS_SHOWN and run.teachers):
            verdicts.append({"name": name, "count": count, "report": reported,
                             "mismatch": reported is not None and reported != count})
    extra = report.get("extra") if isinstance(report.get("extra"), dict) else {}
    per_teacher = extra.get("per_teacher") or {}
    teachers = []
    for name in sorted(set(index.teachers) | set(per_teacher)):
        tally, made = index.teachers.get(name), per_teacher.get(name, {})
        teachers.append({
            "name": name, "made": made.get("made", tally.answers - tally.cached if tally else 0),
            "cached": made.get("cached", tally.cached if tally else 0),
            "failed": made.get("failed", tally.failed if tally else 0),
            "excluded": tally.excluded if tally else 0,
            "cost_usd": made.get("cost_usd", tally.cost_usd if tally else 0.0),
            "won": tally.won if tally else 0, "voted": tally.voted if tally else 0})
    calls, tokens = report.get("teacher_calls") or {}, report.get("tokens") or {}
    estimate = extra.get("estimate") or {}
    cost = {"usd": float(report.get("cost_usd") or 0.0), "made": calls.get("made", 0),
            "cached": calls.get("cached", 0), "failed": calls.get("failed", 0),
            "prompt": tokens.get("prompt", 0), "completion": tokens.get("completion", 0),
            "estimate": sorted(estimate.items())}
    columns = _columns(run.ablation_rows)
    reported = report.get("outcomes") if isinstance(report.get("outcomes"), dict) else {}
    outcomes = [{"name": name, "count": index.outcomes.get(name, 0), "report": reported.get(name),
                 "mismatch": name in reported and reported.get(name) != index.outcomes.get(name, 0)}
                for name in sorted(set(index.outcomes) | set(reported))]
    hindsight = report.get("hindsight") if isinstance(report.get("hindsight"), dict) else {}
    return {"outcomes": outcomes, "hindsight": sorted((k, v) for k, v in hindsight.items()
                                                      if isinstance(v, int | float | str)),
            "verdicts": verdicts, "tiers": sorted(index.tiers.items()), "teachers": teachers, "cost": cost,
            "matrix": matrix, "ablation_rows": run.ablation_rows, "ablation_columns": columns,
            "ablation_plot": plot}


def _columns(rows: Sequence[dict[str, str]]) -> list[str]:
    wanted = ("pool", "voted", "consensus_rate", "abstain_rate", "agree_rate", "pairs", "cost_usd", "jaccard")
    present = list(rows[0]) if rows else []
    return [key for key in wanted if key in present] or present
