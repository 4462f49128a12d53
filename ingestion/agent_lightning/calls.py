"""One recorded LLM call of an agent-lightning rollout → one TraceState (pure).

Both formats (the seed example's spans, the Gateway's events) come down to the same thing: a rollout
(trace) of model calls, each with the request it sent (messages, tools, sampling), the message it got
back, the token ids and log-probabilities vLLM returned, and the rollout's reward. The states keep what
collect/'s rollouts keep (ingestion/rollouts.py): `prompt_token_ids`, `completion_token_ids`, `logprobs`
(one float per completion token), `finish_reason`, `sampling`, `reward` in the metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ingestion.outcome import call_outcome, turn_outcome
from ingestion.rollouts import parse_arguments, to_trace_message
from ingestion.schema import Action, ToolCall, TraceState, make_state_id

# The request keys that are the conversation, not its sampling.
CONVERSATION_KEYS = ("messages", "tools", "model", "stream", "return_token_ids", "logprobs")


@dataclass
class Call:
    """One answered chat call, as recorded."""

    request: dict[str, Any]                   # the body sent: messages, tools, sampling
    message: dict[str, Any]                   # the assistant message of choices[0]
    model: str | None = None                  # the served model that answered
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    usage: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)   # format-specific metadata (ids, latency)


@dataclass
class Rollout:
    """A rollout's calls and what is known of its end."""

    source: str
    rollout_id: str
    attempt_id: str | None
    calls: list[Call]
    reward: float | None = None
    exit_status: str | None = None            # the Gateway's terminal state (succeeded / failed)
    metadata: dict[str, Any] = field(default_factory=dict)


def logprob_values(logprobs: Any) -> list[float] | None:
    """The chosen tokens' log-probabilities of a choice (OpenAI chat `content`, or completions'
    `token_logprobs`), None when there are none or one is not a number.

    >>> logprob_values({"content": [{"token": "a", "logprob": -0.5}]}), logprob_values(None)
    ([-0.5], None)
    """
    if not isinstance(logprobs, dict):
        return None
    items = logprobs.get("content")
    raw = [item.get("logprob") if isinstance(item, dict) else None for item in items] \
        if isinstance(items, list) else logprobs.get("token_logprobs")
    if not isinstance(raw, list) or not all(_number(v) for v in raw):
        return None
    return [float(v) for v in raw]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def token_ids(value: Any) -> list[int] | None:
    """A list of token ids, or None.

    >>> token_ids([1, 2]), token_ids([]), token_ids("x")
    ([1, 2], None, None)
    """
    if isinstance(value, list) and value and all(type(v) is int for v in value):
        return value
    return None


def student_action(message: dict[str, Any]) -> Action:
    """The reply as an Action (reasoning kept as `thinking`, never sent to teachers).

    >>> student_action({"content": "done", "reasoning": "r"})
    Action(content='done', tool_calls=[], thinking='r')
    """
    calls = [ToolCall(id=call.get("id") or f"call_{index}",
                      name=(call.get("function") or {}).get("name") or "",
                      arguments=parse_arguments((call.get("function") or {}).get("arguments")))
             for index, call in enumerate(message.get("tool_calls") or [])
             if isinstance(call, dict)]
    content = message.get("content")
    thinking = message.get("reasoning_content") or message.get("reasoning")
    return Action(content=content if isinstance(content, str) else "", tool_calls=calls,
                  thinking=thinking if isinstance(thinking, str) and thinking else None)


def answered_ids(calls: list[Call]) -> set[str]:
    """Tool-call ids some request of the rollout answers with a `tool` message."""
    return {m.get("tool_call_id") for call in calls for m in call.request.get("messages") or []
            if isinstance(m, dict) and m.get("role") == "tool"} - {None}


def outcome(action: Action, answered: set[str], rollout: Rollout) -> dict[str, Any]:
    """A call's outcome: each tool call `ok` when a later request carries its result (the formats record
    no exit codes), else `no_result`; the rollout's reward and end on every state, as for collect/'s."""
    calls = [call_outcome(c.id, c.name, "ok" if c.id in answered else "no_result") for c in action.tool_calls]
    return turn_outcome(calls, reward=rollout.reward, exit_status=rollout.exit_status)


def rollout_states(rollout: Rollout) -> list[TraceState]:
    """The states of a rollout, one per call, in call order."""
    answered = answered_ids(rollout.calls)
    states = []
    for turn, call in enumerate(rollout.calls):
        action = student_action(call.message)
        sampling = {k: v for k, v in call.request.items() if k not in CONVERSATION_KEYS}
        metadata = {
            **rollout.metadata, "rollout_id": rollout.rollout_id, "attempt_id": rollout.attempt_id,
            **call.extra, "reward": rollout.reward, "exit_status": rollout.exit_status,
            "finish_reason": call.finish_reason, "prompt_token_ids": call.prompt_token_ids,
            "completion_token_ids": call.completion_token_ids, "logprobs": call.logprobs,
            "usage": call.usage, "sampling": sampling, "outcome": outcome(action, answered, rollout),
        }
        states.append(TraceState(
            state_id=make_state_id(rollout.source, rollout.rollout_id, turn), trace_id=rollout.rollout_id,
            turn=turn, source=rollout.source,
            messages=[to_trace_message(m) for m in call.request.get("messages") or [] if isinstance(m, dict)],
            tools=[t for t in call.request.get("tools") or [] if isinstance(t, dict)], student_action=action,
            student_model=call.model, metadata=metadata))
    return states
