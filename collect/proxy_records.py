"""Writing what the recording proxy saw: one `exchange` record per Messages API request, in `proxy.jsonl`.

The record model (`ProxyRecord`) is defined by its reader, in ingestion/rollout_format.py;
ingestion/claude_rollouts.py joins it to the Claude Code session by `message_id` (the proxy chooses
the Anthropic message id it returns, and the CLI writes that id into its session as `message.id`).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from collect.records import RolloutWriter
from ingestion.rollout_format import ProxyRecord


def new_record_id() -> str:
    """24 random hex digits, like the tail of an Anthropic message id.

    >>> len(new_record_id()), new_record_id() != new_record_id()
    (24, True)
    """
    return secrets.token_hex(12)


class RecordWriter(RolloutWriter):
    """Appends records to one proxy.jsonl, flushed per record (a killed run keeps every exchange),
    counting answered requests by role (a failed one counts as an error only)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, mode="ab")
        self.counts: dict[str, int] = {"main": 0, "side": 0, "main_with_token_ids": 0, "errors": 0}
        self.last_error: str | None = None
        self.last_error_kind: str | None = None    # context_overflow or student_error

    def write(self, record: ProxyRecord) -> None:  # type: ignore[override]
        with self._lock:
            if record.error:
                self.counts["errors"] += 1
                self.last_error, self.last_error_kind = record.error, record.error_kind
            else:
                self.counts[record.role] += 1
                self.counts["main_with_token_ids"] += (record.role == "main"
                                                       and record.completion_token_ids is not None)
        super().write(record)
