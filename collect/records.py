"""The rollout trace format: one JSONL file per instance, a header, one record per turn, a final record.

This module is the one definition of the format (documented in collect/ROLLOUT_FORMAT.md); collect/
writes it and ingestion/rollouts.py reads it. Readers ignore keys they do not know, so fields can be
added without a new format version.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import IO, Any, Literal

import orjson
from pydantic import BaseModel, Field

FORMAT = "teacher-replay.rollout"
FORMAT_VERSION = 1
SUFFIX = ".rollout.jsonl"

ExitStatus = Literal["submitted", "max_turns", "student_error", "runtime_error", "interrupted"]


class RolloutHeader(BaseModel):
    type: Literal["header"] = "header"
    format: str = FORMAT
    version: int = FORMAT_VERSION
    rollout_id: str                        # unique per rollout: "<instance_id>.<run_id>"
    run_id: str
    instance_id: str
    repo: str | None = None
    base_commit: str | None = None
    image: str
    student_model: str
    student_url: str
    sampling: dict[str, Any] = Field(default_factory=dict)    # temperature, max_tokens as sent
    max_turns: int
    agent_version: int
    tools: list[dict[str, Any]]            # OpenAI tool schemas offered on every turn
    created_at: str


class Observation(BaseModel):
    """What one tool call returned; the same text goes back to the student as a `tool` message."""

    tool_call_id: str
    name: str
    output: str
    exit_code: int | None = None           # bash only
    timed_out: bool = False
    truncated: bool = False
    error: str | None = None               # the call itself was invalid (bad JSON, unknown tool, ...)


class TurnRecord(BaseModel):
    type: Literal["turn"] = "turn"
    turn: int                              # 0-based
    messages: list[dict[str, Any]]         # the request's messages exactly as sent (OpenAI chat form)
    response: dict[str, Any]               # the assistant message: role, content, tool_calls (as returned)
    reasoning: str | None = None           # reasoning_content / reasoning, when the server splits it out
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None        # vLLM `return_token_ids`; None when not served
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None              # one per completion token
    tokens: list[str] | None = None                  # the tokens those logprobs belong to, as text
    usage: dict[str, Any] | None = None
    observations: list[Observation] = Field(default_factory=list)
    elapsed_s: float = 0.0                 # the student's answer time


class FinalRecord(BaseModel):
    type: Literal["final"] = "final"
    exit_status: ExitStatus
    turns: int
    patch: str | None = None               # `git diff` of /testbed, untracked files included
    reward: float | None = None            # 1.0 resolved / 0.0 not; None when not evaluated
    resolved: bool | None = None
    evaluation: dict[str, Any] | None = None   # the swebench harness report for this instance
    error: str | None = None
    elapsed_s: float = 0.0


def dump_record(record: BaseModel) -> bytes:
    """One JSONL line.

    >>> dump_record(FinalRecord(exit_status="submitted", turns=2))[:40]
    b'{"type":"final","exit_status":"submitted'
    """
    return orjson.dumps(record.model_dump(mode="json")) + b"\n"


class RolloutWriter:
    """Appends records to one rollout file, flushed per record so a crash keeps every finished turn."""

    def __init__(self, path: Path, mode: str = "wb") -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = path.open(mode)

    def write(self, record: BaseModel) -> None:
        with self._lock:
            if self._file is None:
                return                     # closed by an interrupt; the record has nowhere to go
            self._file.write(dump_record(record))
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> RolloutWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
