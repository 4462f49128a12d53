"""What the view's pages show: the overview's template context and each state's record. Pure.

`render.py` and `records.py` turn these into files; nothing here touches the disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from replay.view.content import action_item, call_diff, cut
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


def state_record(row: dict[str, Any], decision: Decision, context: dict[str, Any],
                 verification: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything a state's page shows, as JSON data that `assets/state.js` draws as text: the state's
    row of states.jsonl, its decision, and its context's place in data/ (`TraceItems.context`). Display
    items are `content.action_item` lists: [role, text, note, [[tool, arguments], ...]]. `prev` and
    `next` (the trace's turns before and after) are filled in by `records.StateRecords`; `verify` is the
    pair's check by `replay.verify` (`verified_item`), when there is one.

    >>> row = {"state_id": "s", "trace_id": "t", "turn": 0,
    ...        "student_action": {"content": "<script>x</script>"},
    ...        "metadata": {"outcome": {"kind": "error", "calls": [{"name": "Bash", "error": "exit 1"}]}}}
    >>> r = state_record(row, Decision("not_asked"), {})
    >>> r["student"], r["groups"], r["outcome"], r["errors"]
    (['assistant', '<script>x</script>', '', []], [], 'error', [['Bash', '', None, 'exit 1']])
    """
    metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    outcome = metadata.get("outcome") if isinstance(metadata.get("outcome"), dict) else {}
    result, student, chosen = decision.result, row["student_action"], decision.chosen
    model = row.get("student_model")
    return {
        "id": row["state_id"], "trace": row["trace_id"], "turn": row["turn"], "model": model or "unknown",
        "verdict": decision.verdict,
        "agreement": round(result.get("agreement") or 0.0, 2) if result is not None else None,
        "method": result.get("method") if result is not None else None, "match": decision.match,
        "reason": (result.get("reason") or None) if result is not None else None,
        "outcome": outcome.get("kind"), "recovery": metadata.get("recovery"),
        "errors": [[str(c.get("name") or "?"), str(c.get("kind") or ""), c.get("exit_code"), str(c["error"])]
                   for c in outcome.get("calls") or [] if isinstance(c, dict) and c.get("error")],
        "student": action_item(student, note=model or ""),
        "thinking": cut(student.get("thinking") or ""),
        "chosen": action_item(chosen, note=", ".join(decision.winners)) if chosen else None,
        "diff": call_diff(chosen, student) if chosen and decision.verdict == "pair" else [],
        "groups": groups(decision),
        "failed": [action_item(None, _who(p), p.get("error")) for p in decision.proposals
                   if p.get("action") is None],
        "excluded": decision.excluded, "prev": None, "next": None, "context": context,
        "verify": verified_item(verification),
    }


def verified_item(check: dict[str, Any] | None) -> dict[str, Any] | None:
    """A pair's check (a line of verify/values.jsonl) as the state page draws it: the outcome, each action's
    value and interval, and each branch as [action, sample, reward, how it ended, turns, restored by,
    mismatches, error].

    >>> item = verified_item({"outcome": "verified", "chosen": {"value": 1.0, "interval": [0.34, 1.0]},
    ...     "rejected": {"value": 0.0, "interval": [0.0, 0.66]}, "difference": [0.07, 1.0], "branches": [
    ...     {"arm": "chosen", "sample": 0, "reward": 1.0, "exit_status": "submitted", "turns": 2}]})
    >>> item["branches"], item["chosen"]
    ([['chosen', 0, 1.0, 'submitted', 2, None, 0, '']], [1.0, [0.34, 1.0]])
    """
    if not check:
        return None
    value = {arm: [(check.get(arm) or {}).get("value"), (check.get(arm) or {}).get("interval")]
             for arm in ("chosen", "rejected")}
    branches = [[b.get("arm"), b.get("sample"), b.get("reward"), b.get("exit_status") or b.get("error_kind"),
                 b.get("turns", 0), b.get("restored"), b.get("mismatches", 0),
                 cut(str(b.get("error") or ""), 300)]
                for b in check.get("branches") or ()]
    return {"outcome": check.get("outcome"), "reason": check.get("reason"), **value,
            "difference": check.get("difference"), "mismatches": check.get("restore_mismatches", 0),
            "branches": branches}


def groups(decision: Decision) -> list[dict[str, Any]]:
    """The proposals as the consensus grouped them, winner first; without a consensus result (a judge
    run's undecided states) each teacher's answer is its own group.

    >>> p = [{"teacher": t, "action": {"content": "x"}} for t in "ab"]
    >>> [(g["teachers"], g["winner"]) for g in groups(Decision("judged", p))]
    [(['a'], False), (['b'], False)]
    """
    proposals, result = decision.proposals, decision.result
    if result is None or not result.get("groups"):
        return [{"teachers": [p.get("teacher")], "weight": 1.0, "winner": False,
                 "members": [action_item(p["action"], _who(p))]}
                for p in proposals if p.get("action") is not None]
    reached = bool(result.get("reached"))
    return [{"teachers": group.get("teachers") or [], "weight": group.get("weight"),
             "winner": reached and index == 0,
             "members": [action_item(proposals[i].get("action"), _who(proposals[i]))
                         for i in group.get("members") or () if i < len(proposals)]}
            for index, group in enumerate(result["groups"])]


def _who(proposal: dict[str, Any]) -> str:
    sample = f" #{proposal['sample']}" if proposal.get("sample") else ""
    cached = " (cached)" if proposal.get("cached") else ""
    return f"{proposal.get('teacher')}{sample}{cached}"


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
            "ablation_plot": plot, "teacher_rows": run.teacher_rows, "teacher_columns": _teacher_columns(
                run.teacher_rows), "frontier_plot": FRONTIER if run.frontier_plot else None,
            "recommended": run.recommended, "evaluation": evaluation_context(
                run.evaluation, run.eval_stale, EVAL_PLOT if run.eval_plot else None),
            "verify": report.get("verify") if isinstance(report.get("verify"), dict) else None,
            "sent": sent_context(run.sent)}


def sent_context(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the overview says of sent.jsonl (copied beside the pages): per teacher the states and
    sessions sent, and the settings that chose and changed them.

    >>> sent_context([{"record": "settings", "pseudonymise": True, "redact": True, "filtered": {"since": 2}},
    ...               {"record": "teacher", "teacher": "a", "states": ["s"], "sessions": ["t"],
    ...                "from_cache": {"states": []}}])["teachers"]
    [{'name': 'a', 'states': 1, 'sessions': 1, 'cached': 0}]
    """
    if not rows:
        return None
    settings = next((r for r in rows if r.get("record") == "settings"), {})
    teachers = [{"name": r.get("teacher"), "states": len(r.get("states") or []),
                 "sessions": len(r.get("sessions") or []),
                 "cached": len((r.get("from_cache") or {}).get("states") or [])}
                for r in rows if r.get("record") == "teacher"]
    return {"teachers": teachers, "pseudonymise": settings.get("pseudonymise"),
            "redact": settings.get("redact"),
            "filtered": sorted((settings.get("filtered") or {}).items()),
            "pseudonymised": sorted((settings.get("pseudonymised") or {}).items())}


EVAL_PLOT = "eval.png"


def evaluation_context(evaluation: dict[str, Any] | None, stale: bool,
                       plot: str | None = None) -> dict[str, Any] | None:
    """replay.eval's figures as the overview shows them: a row per figure, a column per model, then the
    paired differences (eval.json is read as it is: the view imports nothing of the eval).

    >>> iv = {"n": 200, "value": 0.9, "low": 0.86, "high": 0.94}
    >>> doc = {"held_out": {"states": 200, "traces": 20, "how": "test"}, "metrics": {"valid": "a call"},
    ...        "models": [{"name": "m", "rates": {"valid": iv}}], "differences": []}
    >>> evaluation_context(doc, False)["rows"][0]
    {'figure': 'valid', 'meaning': 'a call', 'cells': ['0.900 [0.860, 0.940] n=200']}
    """
    if not evaluation:
        return None
    metrics = evaluation.get("metrics") or {}
    models = evaluation.get("models") or []
    rows = [{"figure": key.replace("_", " "), "meaning": meaning,
             "cells": [_interval((m.get("rates") or {}).get(key)) for m in models]}
            for key, meaning in metrics.items()]
    diffs = [{"name": f"{d.get('second')} − {d.get('first')}",
              "cells": [_interval((d.get("rates") or {}).get(key), signed=True) for key in metrics]}
             for d in evaluation.get("differences") or []]
    return {"held": evaluation.get("held_out") or {}, "models": [m.get("name") for m in models], "rows": rows,
            "figures": [key.replace("_", " ") for key in metrics], "differences": diffs,
            "plot": plot, "stale": stale, "command": evaluation.get("command") or "",
            "unreliable": evaluation.get("interval_warning") or None}


def _interval(iv: dict[str, Any] | None, signed: bool = False) -> str:
    if not iv or iv.get("value") is None:
        return "n/a"
    fmt = "{:+.3f}" if signed else "{:.3f}"
    few = f" ({iv.get('traces')} traces: unreliable)" if iv.get("method") == "t" else ""
    return f"{fmt.format(iv['value'])} [{fmt.format(iv['low'])}, {fmt.format(iv['high'])}] n={iv['n']}{few}"


FRONTIER = "frontier.png"


def _teacher_columns(rows: Sequence[dict[str, str]]) -> list[str]:
    """teachers.csv's figures the overview shows: reliability, Shapley shares, leave-one-out deltas."""
    present = list(rows[0]) if rows else []
    return [key for key in present if key in ("teacher", "reliability")
            or key.startswith(("shapley_", "loo_"))]


def _columns(rows: Sequence[dict[str, str]]) -> list[str]:
    wanted = ("pool", "voted", "consensus_rate", "abstain_rate", "agree_rate", "pairs", "cost_usd",
              "jaccard", "hindsight_intent_rate", "hindsight_exact_rate", "failed_reached_rate",
              "usd_per_pair", "pareto")
    present = list(rows[0]) if rows else []
    return [key for key in wanted if key in present] or present
