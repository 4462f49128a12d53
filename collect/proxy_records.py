"""What the recording proxy writes: one `exchange` record per Messages API request, in `proxy.jsonl`.

This module is the one definition of that format: collect/proxy.py writes it, and
ingestion/claude_rollouts.py joins it to the Claude Code session by `message_id` (the proxy chooses
the Anthropic message id it returns, and the CLI writes that id into its session as `message.id`).
Readers ignore keys they do not know.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from collect.records import RolloutWriter

Role = Literal["main", "side"]


class ProxyRecord(BaseModel):
    type: Literal["exchange"] = "exchange"
    id: str                                # random hex, unique across runs
    message_id: str                        # "msg_<id>": the id the CLI got back and wrote to its session
    request_id: str                        # "req_<id>": the `request-id` header (the session's requestId)
    role: Role                             # main: a turn of the student; side: titles, summaries, low model
    side_reason: str | None = None         # why a request is a side request: small_model, no_tools
    model: str                             # the model name the CLI asked for
    backend_model: str                     # the served model it was answered by
    stream: bool = False                   # the CLI asked for SSE
    started_at: str
    latency_s: float = 0.0                 # the backend's answer time
    request: dict[str, Any]                # the OpenAI request as sent: model, messages, tools, sampling
    response: dict[str, Any] | None = None  # the assistant message: role, content, tool_calls
    reasoning: str | None = None
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None        # vLLM `return_token_ids`; None when not served
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None              # one per completion token
    tokens: list[str] | None = None
    usage: dict[str, Any] | None = None
    anthropic_response: dict[str, Any] | None = None  # what the CLI received (before SSE framing)
    status: int = 200                      # the HTTP status the CLI got
    error: str | None = None               # why the backend gave no answer


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

    def write(self, record: ProxyRecord) -> None:  # type: ignore[override]
        with self._lock:
            if record.error:
                self.counts["errors"] += 1
                self.last_error = record.error
            else:
                self.counts[record.role] += 1
                self.counts["main_with_token_ids"] += (record.role == "main"
                                                       and record.completion_token_ids is not None)
        super().write(record)


def read_records(path: Path) -> tuple[list[ProxyRecord], int]:
    """The records of a proxy.jsonl, and how many lines could not be read (a killed run's last one)."""
    from ingestion.jsonl import iter_records
    from ingestion.stats import IngestStats

    lines = IngestStats()  # the shared reader: recovers glued records, counts what it cannot read
    records: list[ProxyRecord] = []
    bad = 0
    for _, data in iter_records(path, lines):
        if data.get("type") != "exchange":
            continue
        try:
            records.append(ProxyRecord.model_validate(data))
        except ValueError:
            bad += 1
    return records, bad + sum(lines.skipped_lines.values())

