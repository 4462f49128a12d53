"""The agent loop: ask the student, run its tool calls, record the turn; stop on a reply without tools."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol

from collect.config import AgentSpec
from collect.records import RolloutWriter
from collect.runtime import Interrupted, RuntimeFailure
from collect.student import StudentError, StudentReply
from collect.tools import Workspace, execute, tool_message
from ingestion.rollout_format import ExitStatus, Observation, TurnRecord


class Asker(Protocol):
    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> StudentReply: ...


@dataclass
class AgentResult:
    exit_status: ExitStatus
    turns: int = 0
    turns_with_token_ids: int = 0
    error: str | None = None


def turn_record(turn: int, messages: list[dict[str, Any]], reply: StudentReply,
                observations: list[Observation]) -> TurnRecord:
    """What one turn leaves in the rollout file.

    >>> turn_record(0, [], StudentReply(message={"role": "assistant", "content": "x"}), []).response
    {'role': 'assistant', 'content': 'x'}
    """
    return TurnRecord(turn=turn, messages=messages, response=reply.message, reasoning=reply.reasoning,
                      finish_reason=reply.finish_reason, prompt_token_ids=reply.prompt_token_ids,
                      completion_token_ids=reply.completion_token_ids, logprobs=reply.logprobs,
                      tokens=reply.tokens, usage=reply.usage, observations=observations,
                      elapsed_s=reply.elapsed_s)


def run_agent(student: Asker, workspace: Workspace, spec: AgentSpec, problem_statement: str,
              writer: RolloutWriter, max_turns: int, stop: threading.Event) -> AgentResult:
    """Drive one rollout to its end; every turn is written as soon as its tool calls have run."""
    messages = spec.first_messages(problem_statement)
    result = AgentResult(exit_status="max_turns")
    for turn in range(max_turns):
        if stop.is_set():
            return _ended(result, "interrupted")
        try:
            reply = student.complete(messages, spec.tools)
        except StudentError as exc:
            return _ended(result, "student_error", str(exc))
        observations: list[Observation] = []
        try:
            for call in reply.message.get("tool_calls", []):
                if stop.is_set():
                    raise Interrupted()
                observations.append(execute(workspace, call))
        except Interrupted:
            return _ended(result, "interrupted")
        except RuntimeFailure as exc:
            return _ended(result, "runtime_error", str(exc))
        finally:
            # Written even when a tool call fails half way: what the student did is the valuable part.
            writer.write(turn_record(turn, list(messages), reply, observations))
            result.turns += 1
            result.turns_with_token_ids += reply.completion_token_ids is not None
        if not reply.message.get("tool_calls"):
            return _ended(result, "submitted")
        messages = [*messages, reply.message, *(tool_message(obs) for obs in observations)]
    return result


def _ended(result: AgentResult, status: ExitStatus, error: str | None = None) -> AgentResult:
    result.exit_status, result.error = status, error
    return result
