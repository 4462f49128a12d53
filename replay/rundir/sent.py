"""OUT/sent.jsonl: a record of what left the machine (issue #50).

The first line holds the settings in force (filters, --select, redaction and pseudonymisation, and what
they replaced); then one line per teacher naming the sessions (trace ids) and states whose requests
were sent to it by this run (`sent`), and those whose answers came from the cache (`from_cache`: sent
by an earlier run with the same request). A call `--max-cost` kept from being made sent nothing. A dry
run sends nothing: its teachers' lines are empty. Built from proposals.jsonl and states.jsonl after the
run, as pure rows (`sent_rows`), so it says what happened, not what was planned.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from replay.options import RunConfig
from replay.rundir.files import PROPOSALS_FILE
from replay.rundir.report import Report

SENT_FILE = "sent.jsonl"
NOT_SENT = ("budget_exhausted",)   # a proposal with this error made no call


def settings_row(config: RunConfig, report: Report) -> dict[str, Any]:
    """The first line: what chose and changed the requests.

    >>> settings_row(RunConfig(source=Path("s"), out=Path("o")), Report())["pseudonymise"]
    True
    """
    scope = config.ingest.scope
    return {"record": "settings", "dry_run": config.dry_run,
            "filters": scope.model_dump(mode="json", exclude={"roots"}) if scope is not None else None,
            "filtered": report.filtered, "select": config.select,
            "states_unselected": report.states_unselected,
            "redact": config.redact, "redactions": report.redactions, "pseudonymise": config.pseudonymise,
            "pseudonymised": report.pseudonymised}


def sent_rows(teachers: list[str], proposals: Iterable[dict[str, Any]], traces: dict[str, str]
              ) -> list[dict[str, Any]]:
    """One row per teacher: the sessions and states its requests were sent for (by this run, or by an
    earlier one when the answer came from the cache), in the order they were asked.

    >>> rows = sent_rows(["a", "b"], [{"teacher": "a", "state_id": "s1", "cached": False},
    ...                               {"teacher": "a", "state_id": "s2", "cached": True},
    ...                               {"teacher": "b", "state_id": "s1", "error": "budget_exhausted"}],
    ...                  {"s1": "t1", "s2": "t1"})
    >>> [(r["teacher"], r["states"], r["sessions"], r["from_cache"]["states"]) for r in rows]
    [('a', ['s1'], ['t1'], ['s2']), ('b', [], [], [])]
    """
    sent: dict[str, dict[str, dict[str, None]]] = {t: {} for t in teachers}
    cached: dict[str, dict[str, dict[str, None]]] = {t: {} for t in teachers}
    for row in proposals:
        if row.get("error") in NOT_SENT or row["teacher"] not in sent:
            continue
        (cached if row.get("cached") else sent)[row["teacher"]].setdefault(row["state_id"], None)
    out = []
    for teacher in teachers:
        states, hits = list(sent[teacher]), list(cached[teacher])
        out.append({"record": "teacher", "teacher": teacher, "states_sent": len(states),
                    "sessions": _sessions(states, traces), "states": states,
                    "from_cache": {"sessions": _sessions(hits, traces), "states": hits}})
    return out


def _sessions(states: list[str], traces: dict[str, str]) -> list[str]:
    return list(dict.fromkeys(traces.get(state, state) for state in states))


def write_sent(work: Path, config: RunConfig, report: Report, teachers: list[str]) -> None:
    """Write `work`/sent.jsonl (the settings, then one line per teacher)."""
    proposals = _lines(work / PROPOSALS_FILE) if (work / PROPOSALS_FILE).is_file() else iter(())
    traces = {row["state_id"]: row["trace_id"] for row in _state_ids(work)}
    rows = [settings_row(config, report), *sent_rows(teachers, proposals, traces)]
    tmp = work / (SENT_FILE + ".tmp")
    tmp.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    tmp.replace(work / SENT_FILE)


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as handle:
        for line in handle:
            yield orjson.loads(line)


def _state_ids(work: Path) -> Iterator[dict[str, str]]:
    from ingestion.store import STATES_FILE

    path = work / STATES_FILE
    if path.is_file():
        for row in _lines(path):
            yield {"state_id": row.get("state_id", ""), "trace_id": row.get("trace_id", "")}
