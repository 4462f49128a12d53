"""report.json: what a run read, skipped, asked, agreed on and wrote (keys fixed by DESIGN.md)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from ingestion.schema import Proposal
from ingestion.stats import IngestStats


class Report(BaseModel):
    files: int = 0
    lines: int = 0
    skipped_lines: dict[str, int] = Field(default_factory=dict)
    record_types: dict[str, int] = Field(default_factory=dict)
    traces: int = 0
    states: int = 0
    states_all_teachers_excluded: int = 0
    # Every state is exactly one of: all teachers excluded, failed, abstained, agree, pair.
    states_failed: int = 0           # teachers asked, not one usable answer (failed, malformed, budget)
    states_budget_stopped: int = 0   # of states_failed: where --max-cost kept calls from being made
    teacher_calls: dict[str, int] = Field(default_factory=lambda: {"made": 0, "cached": 0, "failed": 0})
    excluded_same_family: dict[str, int] = Field(default_factory=dict)
    redactions: dict[str, int] = Field(default_factory=dict)
    consensus: dict[str, int] = Field(default_factory=lambda: {"reached": 0, "abstained": 0})
    agree: int = 0
    pairs: int = 0
    preflight_dropped: int = 0
    tokens: dict[str, int] = Field(default_factory=lambda: {"prompt": 0, "completion": 0, "cached_prompt": 0})
    cost_usd: float = 0.0
    outcomes: dict[str, int] = Field(default_factory=dict)   # every state's outcome kind (#25)
    states_unselected: int = 0       # left out by --select: counted, never sent to a teacher
    # Issue #50: states never read, by the first filter that left them out (--project,
    # --exclude-project, --since, --until; no_timestamp under a date bound), and the personal data
    # replaced by placeholders, distinct values per trace by kind (user_name, email, person_name, host,
    # ip_address, phone).
    filtered: dict[str, int] = Field(default_factory=dict)
    pseudonymised: dict[str, int] = Field(default_factory=dict)
    # Beyond the contract: where the numbers above come from.
    dry_run: bool = False
    repaired_lines: dict[str, int] = Field(default_factory=dict)
    skipped_files: dict[str, int] = Field(default_factory=dict)
    skipped_records: dict[str, int] = Field(default_factory=dict)
    skipped_traces: dict[str, int] = Field(default_factory=dict)
    skipped_turns: dict[str, int] = Field(default_factory=dict)
    budget: dict[str, int] = Field(default_factory=dict)
    history: dict[str, int] = Field(default_factory=dict)       # messages ingestion added or left out
    trace_id_collisions: int = 0     # traces whose id an earlier file had taken: given a distinct one
    problems: list[dict[str, Any]] = Field(default_factory=list)
    formats: dict[str, dict[str, int]] = Field(default_factory=dict)   # format -> {files, states}
    # Failed states with a recovery: how often the consensus was the student's correction
    # (replay.decide.hindsight)
    hindsight: dict[str, Any] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)

    def add_ingest(self, stats: IngestStats) -> None:
        """Copy ingestion's counters in."""
        self.files, self.lines = stats.files, stats.lines
        self.traces, self.states = stats.traces, stats.states
        self.trace_id_collisions = stats.trace_id_collisions
        for name in ("skipped_lines", "repaired_lines", "skipped_files", "record_types",
                     "skipped_records", "skipped_traces", "skipped_turns", "budget", "history"):
            setattr(self, name, dict(sorted(getattr(stats, name).items())))
        self.problems = list(stats.problems)
        self.formats = {name: dict(counts) for name, counts in sorted(stats.formats.items())}
        self.outcomes = dict(sorted(stats.outcomes.items()))
        self.filtered = dict(sorted(stats.filtered.items()))


def too_many_failed(report: Report, max_failed: float) -> str | None:
    """Why the run must not replace OUT's dataset: more than `max_failed` of the states put to
    teachers failed. None when it may.

    >>> r = Report(states=10, states_failed=2)
    >>> too_many_failed(r, 0.1)
    '2 of 10 states failed (20%, more than --max-failed 10%)'
    >>> too_many_failed(r, 0.2) is None
    True
    """
    asked = report.states - report.states_unselected - report.states_all_teachers_excluded
    if not asked or report.states_failed <= max_failed * asked:
        return None
    text = (f"{report.states_failed} of {asked} states failed ({report.states_failed / asked:.0%}, more than "
            f"--max-failed {max_failed:.0%})")
    if report.states_budget_stopped:
        text += (f", {report.states_budget_stopped} of them because --max-cost was reached (raise it, or "
                 f"pass --max-failed 1 to write the partial dataset)")
    if reasons := report.extra.get("failure_kinds"):
        text += " — " + ", ".join(f"{kind}: {n}" for kind, n in list(reasons.items())[:4])
    return text


def failure_kinds(proposals: list[Proposal]) -> dict[str, int]:
    """Proposals without an action, by kind (`connection`, `timeout`, `invalid_tool_arguments`, ...).

    >>> failure_kinds([Proposal(state_id="s", teacher="a", model="m", error="timeout: slow")])
    {'timeout': 1}
    """
    kinds = Counter(p.error.split(":")[0] for p in proposals if p.action is None and p.error)
    return dict(kinds.most_common())
