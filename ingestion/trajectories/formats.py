"""Each trajectory format's record → Conversations (ingestion/linear.py turns them into states).

- mini-swe-agent (`*.traj.json`): `messages` (OpenAI chat; `mini-swe-agent-1` acts in a fenced bash
  block, `1.1` through `tool_calls` and `tool` messages); `info.config.model.model_name`,
  `info.exit_status`, `info.submission`.
- SWE-agent (`*.traj`): `history` (role messages with `thought` / `action`, `tool_calls` where the model
  called functions; demonstrations dropped); else `trajectory` steps (`thought` shown, `action` run,
  `observation`); `info.exit_status`, `info.submission`, model from `replay_config` (JSON text).
- OpenHands (evaluation `output.jsonl` rows): `history` events; an agent action with
  `tool_call_metadata` is grouped by its model response (one turn per response, its text and calls as
  the model returned them); one without is a call named for the action (`run` → `execute_bash`);
  observations answer by `tool_call_id` or `cause`; `metadata.llm_config.model`; `test_result`
  (`report.resolved`), `error`.
- ATIF (Harbor `trajectory.json`): `steps` of `system` / `user` / `agent`; an agent step's `message` and
  `tool_calls`, its `observation.results` answer them; `reasoning_content` dropped; tools from
  `agent.tool_definitions`; model from the step or `agent.model_name`.
- Dataset rows: `messages` as for mini-swe-agent (text or tool-call actions), `resolved` / `reward`,
  model from `model` / `model_name` / `model_name_or_path`, tools from `tools` where given.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from ingestion.linear import Conversation, Turn
from ingestion.schema import Action, ToolCall
from ingestion.stats import IngestStats
from ingestion.trajectories.chat import ChatBuilder, content_text, openai_calls

# OpenHands actions recorded without function calling, as the tool each stands for (CodeActAgent's).
OPENHANDS_ACTIONS = {"run": ("execute_bash", "command"), "run_ipython": ("execute_ipython_cell", "code"),
                     "finish": ("finish", "final_thought"), "think": ("think", "thought")}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _json(value: Any) -> Any:
    """A value that may be JSON text (SWE-agent's `replay_config`) or Python repr (old `tool_calls`).

    >>> _json('{"a": 1}'), _json("[{'b': 2}]"), _json("x y")
    ({'a': 1}, [{'b': 2}], None)
    """
    if not isinstance(value, str):
        return value
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    return None


def _facts(**facts: Any) -> dict[str, Any]:
    return {key: value for key, value in facts.items() if value is not None}


def _run_facts(info: dict[str, Any]) -> dict[str, Any]:
    """A run's `exit_status`, and whether it submitted anything (mini-swe-agent, SWE-agent `info`).

    >>> _run_facts({"exit_status": "Submitted", "submission": "diff"})
    {'exit_status': 'Submitted', 'submitted': True}
    """
    return _facts(exit_status=info.get("exit_status"),
                  submitted=bool(info.get("submission")) if "submission" in info else None)


def mini_swe_agent(record: dict[str, Any], conversation: Conversation, stats: IngestStats) -> None:
    info = _dict(record.get("info"))
    config = _dict(info.get("config"))
    model = _dict(config.get("model")).get("model_name")
    conversation.environment.update(version=info.get("mini_version"))
    conversation.meta.update(trajectory_format=record.get("trajectory_format"))
    conversation.episode.update(_run_facts(info))
    _messages(record.get("messages"), conversation, stats, model)


def _messages(messages: Any, conversation: Conversation, stats: IngestStats, model: str | None) -> None:
    if not isinstance(messages, list):
        stats.skipped_traces["trajectory_without_messages"] += 1
        return
    builder = ChatBuilder(conversation, stats, model)
    for n, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("is_demo"):
            stats.skipped_records["trajectory.not_a_message" if not isinstance(message, dict)
                                  else "trajectory.demonstration"] += 1
            continue
        if isinstance(message.get("tool_calls"), str):   # old SWE-agent: the list's Python repr
            message = {**message, "tool_calls": _json(message["tool_calls"])}
        if isinstance(message.get("tool_call_ids"), str):
            message = {**message, "tool_call_ids": _json(message["tool_call_ids"])}
        builder.add(message, f"{conversation.source}:{conversation.trace_id}:{n}", {"message": n})


def swe_agent(record: dict[str, Any], conversation: Conversation, stats: IngestStats) -> None:
    info = _dict(record.get("info"))
    replay = _dict(_json(record.get("replay_config")))
    model_config = _dict(_dict(replay.get("agent")).get("model"))
    model = model_config.get("name") or model_config.get("model_name")
    conversation.episode.update(_run_facts(info))
    history = record.get("history")
    if isinstance(history, list) and history:
        _messages(history, conversation, stats, model)
        return
    builder = ChatBuilder(conversation, stats, model)
    for n, step in enumerate(record.get("trajectory") if isinstance(record.get("trajectory"), list) else ()):
        if not isinstance(step, dict):
            continue
        key = f"{conversation.source}:{conversation.trace_id}:{n}"
        builder.assistant({"content": str(step.get("thought") or ""), "action": step.get("action"),
                           "thought": step.get("thought")}, key, {"step": n})
        if builder.open_text_call is not None:
            builder.result(builder.open_text_call.id, str(step.get("observation") or ""))


def atif(record: dict[str, Any], conversation: Conversation, stats: IngestStats) -> list[dict[str, Any]]:
    """Adds the steps; returns the tools the trajectory defines (`agent.tool_definitions`)."""
    agent = _dict(record.get("agent"))
    conversation.environment.update(version=agent.get("version"), agent=agent.get("name"))
    builder = ChatBuilder(conversation, stats, agent.get("model_name"))
    for n, step in enumerate(record.get("steps") if isinstance(record.get("steps"), list) else ()):
        if not isinstance(step, dict):
            continue
        source, text = step.get("source"), content_text(step.get("message"))
        if source == "user":
            builder.add({"role": "user", "content": text}, "")
            continue
        if source != "agent":
            stats.skipped_records[f"atif.{source}"] += 1
            continue
        key = f"atif:{conversation.trace_id}:{step.get('step_id', n)}"
        calls = [{"id": c.get("tool_call_id"), "function": {"name": c.get("function_name"),
                                                            "arguments": c.get("arguments")}}
                 for c in step.get("tool_calls") or () if isinstance(c, dict)]
        builder.add({"role": "assistant", "content": text, "tool_calls": calls,
                     "model": step.get("model_name"),
                     "reasoning_content": step.get("reasoning_content")}, key, {"step": step.get("step_id")})
        results = _dict(step.get("observation")).get("results")
        for m, result in enumerate(results if isinstance(results, list) else ()):
            if not isinstance(result, dict):
                continue
            call_id = result.get("source_call_id") or (calls[m]["id"] if m < len(calls) else None)
            if call_id:
                builder.result(str(call_id), content_text(result.get("content")))
            else:
                conversation.items.append({"role": "user", "content": content_text(result.get("content"))})
    tools = agent.get("tool_definitions")
    return [t for t in tools if isinstance(t, dict) and "function" in t] if isinstance(tools, list) else []


def dataset_row(record: dict[str, Any], conversation: Conversation,
                stats: IngestStats) -> list[dict[str, Any]]:
    """Adds a row's messages; returns the tools the row defines (`tools`, a list or its JSON text)."""
    model = record.get("model") or record.get("model_name") or record.get("model_name_or_path")
    conversation.episode.update(_facts(resolved=record.get("resolved"), reward=record.get("reward"),
                                       exit_status=record.get("exit_status")))
    conversation.meta.update(_facts(instance_id=record.get("instance_id")))
    messages = _json(record.get("messages"))
    _messages(messages, conversation, stats, model if isinstance(model, str) else None)
    tools = _json(record.get("tools"))
    return [t for t in tools if isinstance(t, dict) and "function" in t] if isinstance(tools, list) else []


def openhands(record: dict[str, Any], conversation: Conversation, stats: IngestStats) -> None:
    llm = _dict(_dict(record.get("metadata")).get("llm_config"))
    model = llm.get("model")
    report = _dict(_dict(record.get("test_result")).get("report"))
    resolved = record.get("resolved", report.get("resolved"))
    conversation.episode.update(_facts(resolved=resolved, agent_error=record.get("error") or None))
    conversation.meta.update(_facts(instance_id=record.get("instance_id")))
    builder = ChatBuilder(conversation, stats, model)
    turns: dict[str, Turn] = {}          # model response id -> its turn
    by_event: dict[Any, str] = {}        # action event id -> call id
    for event in record.get("history") if isinstance(record.get("history"), list) else ():
        if not isinstance(event, dict):
            continue
        source, metadata = event.get("source"), _dict(event.get("tool_call_metadata"))
        if "observation" in event:
            call_id = metadata.get("tool_call_id") or by_event.get(event.get("cause"))
            if call_id:
                extras = _dict(event.get("extras"))
                code = _dict(extras.get("metadata")).get("exit_code", extras.get("exit_code"))
                text = str(event.get("content") or "")
                # -1: OpenHands' "still running" (no exit yet), not a failure
                failed = event.get("observation") == "error" or (
                    isinstance(code, int) and code not in (0, -1))
                builder.result(str(call_id), text, {"returncode": code} if isinstance(code, int) else None,
                               failed)
            else:
                stats.skipped_records[f"openhands.observation.{event.get('observation')}"] += 1
            continue
        action = event.get("action")
        if source == "user" and action == "message":
            builder.add({"role": "user", "content": str(_dict(event.get("args")).get("content")
                                                        or event.get("message") or "")}, "")
        elif source == "agent" and action not in (None, "system", "recall"):
            _openhands_action(event, metadata, builder, turns, by_event, conversation, model)
        else:
            stats.skipped_records[f"openhands.{source}.{action}"] += 1


def _openhands_action(event: dict[str, Any], metadata: dict[str, Any], builder: ChatBuilder,
                      turns: dict[str, Turn], by_event: dict[Any, str], conversation: Conversation,
                      model: str | None) -> None:
    args = _dict(event.get("args"))
    response = _dict(metadata.get("model_response"))
    key = f"openhands:{conversation.trace_id}:{response.get('id') or event.get('id')}"
    if metadata:
        by_event[event.get("id")] = str(metadata.get("tool_call_id"))
        if key in turns:            # another call of a response already read
            return
        choices = response.get("choices") if isinstance(response.get("choices"), list) else []
        message = _dict(choices[0].get("message")) if choices and isinstance(choices[0], dict) else {}
        calls = openai_calls(message.get("tool_calls"), key, builder.stats) or [
            ToolCall(id=str(metadata.get("tool_call_id")), name=str(metadata.get("function_name") or "tool"),
                     arguments={k: v for k, v in args.items() if v not in (None, "")})]
        text = content_text(message.get("content"))
        response_model = response.get("model") if isinstance(response.get("model"), str) else None
    elif event.get("action") == "message":
        calls, text, response_model = [], str(args.get("content") or event.get("message") or ""), None
    else:
        name, field = OPENHANDS_ACTIONS.get(event.get("action"), (str(event.get("action")), None))
        call_id = f"{key}-call"
        by_event[event.get("id")] = call_id
        arguments = {field: args.get(field)} if field else {
            k: v for k, v in args.items() if v not in (None, "")}
        calls, text, response_model = [ToolCall(id=call_id, name=name, arguments=arguments)], \
            str(args.get("thought") or ""), None
    action = Action(content=text, tool_calls=calls)
    builder.names.update((c.id, c.name) for c in calls)
    turn = Turn(action, key, response_model or model, {"event": event.get("id")})
    turns[key] = turn
    builder.conversation.items.append(turn)
