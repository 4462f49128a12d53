"""report.json: what a run read, skipped, asked, agreed on and wrote (keys fixed by DESIGN.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ingestion.stats import IngestStats


class Report(BaseModel):
    files: int = 0
    lines: int = 0
    skipped_lines: dict[str, int] = Field(default_factory=dict)
    record_types: dict[str, int] = Field(default_factory=dict)
    traces: int = 0
    states: int = 0
    states_all_teachers_excluded: int = 0
    teacher_calls: dict[str, int] = Field(default_factory=lambda: {"made": 0, "cached": 0, "failed": 0})
    excluded_same_family: dict[str, int] = Field(default_factory=dict)
    redactions: dict[str, int] = Field(default_factory=dict)
    consensus: dict[str, int] = Field(default_factory=lambda: {"reached": 0, "abstained": 0})
    agree: int = 0
    pairs: int = 0
    preflight_dropped: int = 0
    tokens: dict[str, int] = Field(default_factory=lambda: {"prompt": 0, "completion": 0, "cached_prompt": 0})
    cost_usd: float = 0.0
    # Beyond the contract: where the numbers above come from.
    dry_run: bool = False
    repaired_lines: dict[str, int] = Field(default_factory=dict)
    skipped_files: dict[str, int] = Field(default_factory=dict)
    skipped_records: dict[str, int] = Field(default_factory=dict)
    skipped_traces: dict[str, int] = Field(default_factory=dict)
    skipped_turns: dict[str, int] = Field(default_factory=dict)
    budget: dict[str, int] = Field(default_factory=dict)
    history: dict[str, int] = Field(default_factory=dict)       # messages ingestion added or left out
    problems: list[dict[str, Any]] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)

    def add_ingest(self, stats: IngestStats) -> None:
        """Copy ingestion's counters in."""
        self.files, self.lines = stats.files, stats.lines
        self.traces, self.states = stats.traces, stats.states
        for name in ("skipped_lines", "repaired_lines", "skipped_files", "record_types",
                     "skipped_records", "skipped_traces", "skipped_turns", "budget", "history"):
            setattr(self, name, dict(sorted(getattr(stats, name).items())))
        self.problems = list(stats.problems)
