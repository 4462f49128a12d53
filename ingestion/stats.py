"""Counters that ingestion fills as it reads; `replay` turns them into report.json."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

MAX_PROBLEMS = 1000  # a report with a million identical lines helps no one


@dataclass
class IngestStats:
    files: int = 0
    lines: int = 0
    traces: int = 0
    states: int = 0
    trace_id_collisions: int = 0    # traces given a distinct id: an earlier file had theirs (ids.py)
    skipped_lines: Counter[str] = field(default_factory=Counter)    # reason -> lines not ingested
    repaired_lines: Counter[str] = field(default_factory=Counter)   # reason -> lines ingested after repair
    skipped_files: Counter[str] = field(default_factory=Counter)    # reason -> files
    record_types: Counter[str] = field(default_factory=Counter)     # every record's `type`
    skipped_records: Counter[str] = field(default_factory=Counter)  # non-conversation types, by type
    skipped_traces: Counter[str] = field(default_factory=Counter)   # e.g. subagent, warmup
    skipped_turns: Counter[str] = field(default_factory=Counter)    # e.g. duplicate_message_id, synthetic
    budget: Counter[str] = field(default_factory=Counter)           # truncated / dropped messages
    history: Counter[str] = field(default_factory=Counter)          # e.g. hook_feedback, fork_inherited
    problems: list[dict[str, Any]] = field(default_factory=list)    # {file, line, reason, action}
    formats: dict[str, Counter[str]] = field(default_factory=dict)  # format -> {files, states}
    outcomes: Counter[str] = field(default_factory=Counter)         # states by outcome kind
    filtered: Counter[str] = field(default_factory=Counter)         # states left out, by filter (scope.py)
    scope_matched: Counter[str] = field(default_factory=Counter)    # `project:GLOB` -> states it matched

    def count_format(self, name: str, files: int = 0, states: int = 0) -> None:
        """One more file (or states) read as format `name` (report.json `formats`)."""
        counts = self.formats.get(name)
        if counts is None:   # not setdefault: its default would be built on every call (per state)
            counts = self.formats[name] = Counter(files=0, states=0)
        counts["files"] += files
        counts["states"] += states

    def problem(self, file: str, line: int | None, reason: str, action: str = "skipped",
                detail: str | None = None) -> None:
        """Count one bad line (or file) by reason and keep where it was (and the OS's words, if any)."""
        if action == "skipped":
            self.skipped_lines[reason] += 1
        elif action == "repaired":
            self.repaired_lines[reason] += 1
        else:
            self.skipped_files[reason] += 1
        if len(self.problems) < MAX_PROBLEMS:
            entry: dict[str, Any] = {"file": file, "line": line, "reason": reason, "action": action}
            if detail:
                entry["detail"] = detail
            self.problems.append(entry)

    def add(self, other: IngestStats) -> None:
        """Count `other` (a later file's stats, read apart) in, as if this had read that file itself:
        counters key by key in `other`'s order (report.json lists keys as first counted), problems up to
        the cap.

        >>> a, b = IngestStats(files=1), IngestStats(files=2)
        >>> b.problem("f", 3, "bad_json"); b.count_format("codex", files=1)
        >>> a.add(b); (a.files, a.skipped_lines["bad_json"], a.formats["codex"]["files"], len(a.problems))
        (3, 1, 1, 1)
        """
        for name in ("files", "lines", "traces", "states", "trace_id_collisions"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("skipped_lines", "repaired_lines", "skipped_files", "record_types", "skipped_records",
                     "skipped_traces", "skipped_turns", "budget", "history", "outcomes", "filtered",
                     "scope_matched"):
            mine = getattr(self, name)
            for key, count in getattr(other, name).items():
                mine[key] += count
        self.problems += other.problems[:max(0, MAX_PROBLEMS - len(self.problems))]
        for kind, counts in other.formats.items():
            self.count_format(kind, files=counts["files"], states=counts["states"])

