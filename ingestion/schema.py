"""The core types every package shares: one action, one trace state.

Everything else in teacher-replay imports these; nothing here does I/O.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# `claude_code` and `swebench_rollout` (collected rollouts), then the other agents' logs, by format, then
# agent-lightning's rollouts (its 0.3 span streams, its 1.0 Gateway).
SourceKind = Literal["claude_code", "swebench_rollout", "codex", "gemini", "copilot",
                     "mini_swe_agent", "swe_agent", "openhands", "atif", "trajectory_dataset",
                     "agl_spans", "agl_gateway"]


class ToolCall(BaseModel):
    """One tool call, arguments already parsed (never a JSON string)."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    def to_openai(self) -> dict[str, Any]:
        """OpenAI chat form, with arguments as an object (TRL/chat templates want objects).

        >>> ToolCall(id="c1", name="Bash", arguments={"command": "ls"}).to_openai()["function"]
        {'name': 'Bash', 'arguments': {'command': 'ls'}}
        """
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


class Action(BaseModel):
    """What an agent does in one assistant turn."""

    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # Kept for the student's own reproduction; never sent to teachers.
    thinking: str | None = None

    @field_validator("thinking")
    @classmethod
    def _no_empty_thinking(cls, value: str | None) -> str | None:
        """Newer CLIs write thinking blocks that hold only a signature: no thinking is None, never "".

        >>> Action(thinking="  ").thinking is None
        True
        """
        return value if value and value.strip() else None

    def to_message(self) -> dict[str, Any]:
        """The action as one OpenAI assistant message, thinking left out.

        >>> Action(content="hi").to_message()
        {'role': 'assistant', 'content': 'hi'}
        """
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message


class TraceState(BaseModel):
    """The context before one assistant turn, and what the student did there."""

    state_id: str
    trace_id: str
    turn: int
    source: SourceKind
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    student_action: Action
    student_model: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Proposal(BaseModel):
    """One teacher's answer (or failure) for one state and sample index."""

    state_id: str
    teacher: str                       # the pool entry's name (alias or raw model string)
    model: str                         # the litellm model string that was called
    family: str | None = None
    sample: int = 0
    action: Action | None = None       # None when the call failed or the answer was invalid
    error: str | None = None           # short reason: "invalid_tool_arguments", "rate_limit: ...", ...
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


def make_state_id(source: str, trace_id: str, turn: int) -> str:
    """Stable across runs.

    >>> make_state_id("claude_code", "abc", 3)
    'claude_code:abc:3'
    """
    return f"{source}:{trace_id}:{turn}"


class StrictModel(BaseModel):
    """Base for configs: unknown keys are mistakes."""

    model_config = ConfigDict(extra="forbid")


class ReplayError(Exception):
    """Base of every error a user can cause; the CLIs print it as one line."""


class SourceError(ReplayError):
    """The --source path is missing or holds nothing to ingest."""
