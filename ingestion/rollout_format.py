"""The rollout trace formats `collect/` writes and `ingestion/` reads, defined once, here.

- `<instance>.rollout.jsonl` (mini agent) / `rollout.jsonl` (claude-code agent): a header, one record
  per student turn, a final record (documented in collect/ROLLOUT_FORMAT.md);
- `proxy.jsonl` (claude-code agent): one `exchange` record per Messages API request the recording
  proxy answered, joined to the Claude Code session by `message_id`.

The reader owns the format it reads: collect/ writes through these models. Readers ignore keys they
do not know, so fields can be added without a new format version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field

from ingestion.jsonl import iter_records
from ingestion.stats import IngestStats

FORMAT = "teacher-replay.rollout"
FORMAT_VERSION = 1
SUFFIX = ".rollout.jsonl"

# context_overflow: the conversation outgrew the student's context; the patch is graded as it stands.
ExitStatus = Literal["submitted", "max_turns", "context_overflow", "student_error", "runtime_error",
                     "interrupted"]
GRADED: tuple[ExitStatus, ...] = ("submitted", "max_turns", "context_overflow")   # the student's own ends


class RolloutHeader(BaseModel):
    type: Literal["header"] = "header"
    format: str = FORMAT
    version: int = FORMAT_VERSION
    rollout_id: str                        # unique per rollout: "<instance_id>.<run_id>"
    run_id: str
    instance_id: str
    sample: int = 0                        # which of the instance's rollouts (collect.run --samples)
    repo: str | None = None
    base_commit: str | None = None
    image: str
    student_model: str
    student_url: str | None                # None: an official API's own endpoint
    student_provider: str | None = None    # litellm provider of an official-API student; None: vLLM
    sampling: dict[str, Any] = Field(default_factory=dict)    # temperature, top_p, max_tokens as sent
    logprobs_mode: str | None = None       # the server's --logprobs-mode: raw_logprobs = before sampling
    reasoning_echo: str | None = None      # how the student's reasoning went back: field / inline / none
    max_model_len: int | None = None       # the served context, from GET /models
    max_turns: int
    agent_version: int
    tools: list[dict[str, Any]]            # OpenAI tool schemas offered on every turn
    created_at: str
    # collect/answer_key.py: what the scrub of the instance's future left before the first turn
    answer_key: dict[str, Any] | None = None


class Observation(BaseModel):
    """What one tool call returned; the same text goes back to the student as a `tool` message. A reply
    that cannot be acted on (a call left as text, a reply cut at max_tokens) gets one too: without a
    `tool_call_id` it goes back as a `user` message."""

    tool_call_id: str | None
    name: str
    output: str
    exit_code: int | None = None           # bash only
    timed_out: bool = False
    truncated: bool = False
    # invalid_call, unknown_tool (the call was wrong); unparsed_tool_call, truncated_reply (the reply was)
    error: str | None = None


BreakReason = Literal["history_rewritten", "rerendered", "retokenized", "unknown"]


class PrefixBreak(BaseModel):
    """Why a turn's prompt does not extend the previous prompt + completion (collect/reply.py
    `break_reason`): the template rendered earlier history otherwise (`history_rewritten`, e.g. Qwen3 drops
    the reasoning of turns before the last user message), rendered the previous reply otherwise than it
    was written (`rerendered`), or the same text came back as other tokens (`retokenized`)."""

    reason: BreakReason
    token: int                             # the first prompt_token_ids index that differs
    completion_offset: int | None = None   # that index in the previous completion; None: before it


class TurnRecord(BaseModel):
    type: Literal["turn"] = "turn"
    turn: int                              # 0-based
    messages: list[dict[str, Any]]         # the request's messages exactly as sent (OpenAI chat form)
    response: dict[str, Any]               # the assistant message: role, content, tool_calls (as returned)
    reasoning: str | None = None           # reasoning_content / reasoning, when the server splits it out
    reasoning_field: str | None = None     # which of the two the server answered with
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None        # vLLM `return_token_ids`; None when not served
    completion_token_ids: list[int] | None = None
    # The prompt starts with the previous turn's prompt + completion; None on the first turn or
    # without token ids. A break means the echoed history renders otherwise than the model wrote it.
    prefix_ok: bool | None = None
    prefix_break: PrefixBreak | None = None          # why, where prefix_ok is false
    # The completion as generated (the server's /detokenize of completion_token_ids, the end-of-turn
    # token left out): what the next request sends back as the assistant message, so that the template
    # renders the reply exactly as the model wrote it. None: the reply went back parsed (no token ids).
    completion_text: str | None = None
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
    # The prompt starts with the previous turn's prompt + completion; None on the first turn or
    # without token ids. A break means the echoed history renders otherwise than the model wrote it.
    prefix_ok: bool | None = None
    logprobs: list[float] | None = None              # one per completion token
    tokens: list[str] | None = None
    usage: dict[str, Any] | None = None
    anthropic_response: dict[str, Any] | None = None  # what the CLI received (before SSE framing)
    status: int = 200                      # the HTTP status the CLI got
    error: str | None = None               # why the backend gave no answer
    error_kind: str | None = None          # context_overflow, student_error
    backend_url: str | None = None         # the server that answered (the small model may have its own)


def read_proxy_records(path: Path) -> tuple[list[ProxyRecord], int]:
    """The records of a proxy.jsonl, and how many lines could not be read (a killed run's last one)."""
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

