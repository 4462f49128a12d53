"""`OUT/verdicts.jsonl`: every state's verdict as the run decided it, one line per state in states.jsonl's
order, so readers (the view) need not decide again.

A line: `{"state_id", "verdict", "student": the tier the student agreed at or null, "excluded": teachers
of the student's family, "result": the consensus (groups, winner, tier, agreement; null when none was
sought), "forms": {teacher: a hash of the canonical form of its first valid answer}}` — the forms feed
the teacher × teacher agreement matrix (equal hashes, equal forms) without the forms themselves, which
can be whole files.
"""

from __future__ import annotations

import hashlib
from typing import Any

from consensus.result import ConsensusResult
from ingestion.schema import Proposal, TraceState
from replay.ablation.agreement import answer_forms

VERDICTS_FILE = "verdicts.jsonl"
# What the view reads of a result; the rest (canonical forms of every group) can be whole files.
_RESULT = {"method", "reached", "action", "agreement", "teachers", "winner_teachers", "reason", "match"}
_GROUP = {"weight", "teachers", "members", "match"}


def form_hash(form: str) -> str:
    """A short, stable stand-in for a canonical form (equal forms, equal hashes).

    >>> form_hash('{"text":"one"}') == form_hash('{"text":"one"}'), len(form_hash("x"))
    (True, 16)
    """
    return hashlib.blake2b(form.encode(), digest_size=8).hexdigest()


def verdict_record(state: TraceState, verdict: str, student: str | None, result: ConsensusResult | None,
                   proposals: list[Proposal], excluded: list[str]) -> dict[str, Any]:
    """One line of verdicts.jsonl.

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=Action())
    >>> p = [Proposal(state_id="s", teacher="a", model="a", action=Action(content="One"))]
    >>> r = verdict_record(s, "abstained", None, None, p, ["c"])
    >>> r["verdict"], r["excluded"], r["result"], r["forms"] == {"a": form_hash('{"text":"one"}')}
    ('abstained', ['c'], None, True)
    """
    teachers = sorted({p.teacher for p in proposals})
    forms = answer_forms([state], {state.state_id: proposals}, teachers)
    record: dict[str, Any] = {
        "state_id": state.state_id, "verdict": verdict, "student": student, "excluded": excluded,
        "result": None,
        "forms": {name: form_hash(seen[state.state_id]) for name, seen in forms.items() if seen},
    }
    if result is not None:
        record["result"] = result.model_dump(mode="json", include=_RESULT)
        record["result"]["groups"] = [group.model_dump(mode="json", include=_GROUP)
                                      for group in result.groups]
    return record


def stored_result(record: dict[str, Any]) -> ConsensusResult | None:
    """The consensus of a stored line (groups without their canonical forms).

    >>> stored_result({"result": {"method": "vote", "reached": False, "groups": [
    ...     {"weight": 1.0, "teachers": ["a"], "members": [0]}]}}).groups[0].teachers
    ['a']
    """
    value = record.get("result")
    if value is None:
        return None
    groups = [{"canonical": "", **group} for group in value.get("groups") or []]
    return ConsensusResult.model_validate({**value, "groups": groups})
