"""The agent loop: ask the student, act on its reply, record the turn; stop on a reply without a tool call.

A reply the agent cannot act on never ends the rollout as if the student were done:
- a tool call the server's parser left in the text (bad JSON or XML) gets an error observation;
- a reply cut at max_tokens (`finish_reason: length`) gets one too, and its calls are not run (their
  arguments may be cut as well);
- a conversation that outgrows the context ends the rollout as `context_overflow`: the student's own
  failure, graded as it stands.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from collect.config import AgentSpec
from collect.records import RolloutWriter
from collect.reply import StudentReply, extends, find_markup, is_truncated
from collect.runtime import Interrupted, RuntimeFailure
from collect.student import ContextOverflow, StudentError
from collect.tools import Workspace, execute, tool_message
from ingestion.rollout_format import ExitStatus, Observation, PrefixBreak, TurnRecord


class Asker(Protocol):
    sampling: dict[str, Any]

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> StudentReply: ...
    def history_message(self, reply: StudentReply) -> dict[str, Any]: ...
    def explain_break(self, previous: StudentReply, reply: StudentReply) -> PrefixBreak: ...


@dataclass
class AgentResult:
    exit_status: ExitStatus
    turns: int = 0
    turns_with_token_ids: int = 0
    prefix_breaks: int = 0        # turns whose prompt does not extend the previous prompt + completion
    error: str | None = None
    break_reasons: Counter[str] = field(default_factory=Counter)   # PrefixBreak.reason: turns


def turn_record(turn: int, messages: list[dict[str, Any]], reply: StudentReply,
                observations: list[Observation], prefix_ok: bool | None = None,
                prefix_break: PrefixBreak | None = None) -> TurnRecord:
    """What one turn leaves in the rollout file.

    >>> turn_record(0, [], StudentReply(message={"role": "assistant", "content": "x"}), []).response
    {'role': 'assistant', 'content': 'x'}
    """
    return TurnRecord(turn=turn, messages=messages, response=reply.message, reasoning=reply.reasoning,
                      reasoning_field=reply.reasoning_field, finish_reason=reply.finish_reason,
                      prompt_token_ids=reply.prompt_token_ids,
                      completion_token_ids=reply.completion_token_ids, prefix_ok=prefix_ok,
                      prefix_break=prefix_break, completion_text=reply.text,
                      logprobs=reply.logprobs, tokens=reply.tokens, usage=reply.usage,
                      observations=observations, elapsed_s=reply.elapsed_s)


def feedback(reply: StudentReply, spec: AgentSpec, max_tokens: int | None) -> list[Observation] | None:
    """Error observations for a reply that cannot be acted on; None for one whose calls should run.

    >>> from collect.config import load_agent_spec
    >>> cut = StudentReply(message={"role": "assistant", "content": "<tool_call>{"}, finish_reason="length")
    >>> [(o.tool_call_id, o.error) for o in feedback(cut, load_agent_spec(), 64)]
    [(None, 'truncated_reply')]
    >>> left = StudentReply(message={"role": "assistant", "content": "<tool_call>{bad</tool_call>"})
    >>> [o.error for o in feedback(left, load_agent_spec(), None)]
    ['unparsed_tool_call']
    >>> feedback(StudentReply(message={"role": "assistant", "content": "Done."}), load_agent_spec(), None)
    []
    """
    calls = reply.tool_calls
    if is_truncated(reply, max_tokens):
        limit = max_tokens or (reply.usage or {}).get("completion_tokens")
        text = spec.truncated_reply.format(max_tokens=limit)
        unrun = [(call["id"], call["function"]["name"]) for call in calls] or [(None, "")]
        return [Observation(tool_call_id=call_id, name=name, output=text, error="truncated_reply")
                for call_id, name in unrun]
    if calls:
        return None
    marker = find_markup(reply.message.get("content"), spec.tool_call_markers)
    if marker is None:
        return []
    return [Observation(tool_call_id=None, name="", output=spec.unparsed_tool_call.format(marker=marker),
                        error="unparsed_tool_call")]


def run_agent(student: Asker, workspace: Workspace, spec: AgentSpec, problem_statement: str,
              writer: RolloutWriter, max_turns: int, stop: threading.Event) -> AgentResult:
    """Drive one rollout to its end; every turn is written as soon as its tool calls have run."""
    messages = spec.first_messages(problem_statement)
    result = AgentResult(exit_status="max_turns")
    previous: StudentReply | None = None
    for turn in range(max_turns):
        if stop.is_set():
            return _ended(result, "interrupted")
        try:
            reply = student.complete(messages, spec.tools)
        except ContextOverflow as exc:
            return _ended(result, "context_overflow", str(exc))
        except StudentError as exc:
            return _ended(result, "student_error", str(exc))
        prefix_ok = extends(previous, reply)
        why = student.explain_break(previous, reply) if prefix_ok is False and previous else None
        previous = reply
        observations = feedback(reply, spec, student.sampling.get("max_tokens"))
        done = observations == []
        try:
            if observations is None:
                observations = []
                for call in reply.tool_calls:
                    if stop.is_set():
                        raise Interrupted()
                    observations.append(execute(workspace, call))
        except Interrupted:
            return _ended(result, "interrupted")
        except RuntimeFailure as exc:
            return _ended(result, "runtime_error", str(exc))
        finally:
            # Written even when a tool call fails half way: what the student did is the valuable part.
            writer.write(turn_record(turn, list(messages), reply, observations or [], prefix_ok, why))
            result.turns += 1
            result.turns_with_token_ids += reply.completion_token_ids is not None
            result.prefix_breaks += prefix_ok is False
            if why is not None:
                result.break_reasons[why.reason] += 1
        if done:
            return _ended(result, "submitted")
        messages = [*messages, student.history_message(reply), *(tool_message(obs) for obs in observations)]
    return result


def _ended(result: AgentResult, status: ExitStatus, error: str | None = None) -> AgentResult:
    result.exit_status, result.error = status, error
    return result
