"""Collected SWE-bench rollouts (`*.rollout.jsonl`, written by collect.run) → TraceStates.

One state per student turn: `messages` are the turn's request messages (messages[0] is the agent's own
system prompt), `tools` the agent's tool schemas, `student_action` the student's reply, and the
metadata carries what RL-style training needs: token ids, logprobs and the rollout's reward.
The format is defined in ingestion/rollout_format.py and documented in collect/ROLLOUT_FORMAT.md.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from configs import config_path
from ingestion.jsonl import iter_records
from ingestion.outcome import call_outcome, turn_outcome
from ingestion.rollout_format import FORMAT, SUFFIX, FinalRecord, Observation, RolloutHeader, TurnRecord
from ingestion.schema import Action, ToolCall, TraceState, make_state_id
from ingestion.stats import IngestStats

SOURCE = "swebench_rollout"
# The agent's errors about the reply itself (collect/agent.py `feedback`), not about one call's run.
AGENT_ERRORS = ("unparsed_tool_call", "truncated_reply")


def is_rollout_file(path: Path | str) -> bool:
    """A collected rollout, by name (what `replay.run --source DIR` routes here).

    >>> is_rollout_file("out/astropy__astropy-12907.rollout.jsonl"), is_rollout_file("session.jsonl")
    (True, False)
    """
    return str(path).endswith(SUFFIX)


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict; a string the student got wrong is kept whole under `_raw_arguments`.

    >>> parse_arguments('{"command": "ls"}'), parse_arguments('{"command": "ls"')
    ({'command': 'ls'}, {'_raw_arguments': '{"command": "ls"'})
    """
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except json.JSONDecodeError:
        return {"_raw_arguments": raw}
    return value if isinstance(value, dict) else {"_raw_arguments": raw}


def to_trace_message(message: dict[str, Any]) -> dict[str, Any]:
    """A request message in TraceState form: tool-call arguments parsed, never JSON strings.

    >>> to_trace_message({"role": "assistant", "content": "", "tool_calls": [
    ...     {"id": "c", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]})
    {'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c', 'type': 'function', \
'function': {'name': 'bash', 'arguments': {'command': 'ls'}}}]}
    """
    if not message.get("tool_calls"):
        return dict(message)
    calls = [{**call, "function": {**call.get("function", {}),
                                   "arguments": parse_arguments(call.get("function", {}).get("arguments"))}}
             for call in message["tool_calls"]]
    return {**message, "tool_calls": calls}


def student_action(turn: TurnRecord) -> Action:
    """The student's reply as an Action (reasoning kept as `thinking`, never sent to teachers).

    >>> student_action(TurnRecord(turn=0, messages=[], response={"role": "assistant", "content": "done"}))
    Action(content='done', tool_calls=[], thinking=None)
    """
    calls = [ToolCall(id=call.get("id") or f"call_{index}", name=call.get("function", {}).get("name") or "",
                      arguments=parse_arguments(call.get("function", {}).get("arguments")))
             for index, call in enumerate(turn.response.get("tool_calls") or [])]
    content = turn.response.get("content")
    return Action(content=content if isinstance(content, str) else "", tool_calls=calls,
                  thinking=turn.reasoning)


@cache
def _history_patterns() -> list[re.Pattern[str]]:
    rules = tomllib.loads(config_path("history_commands.toml").read_text(encoding="utf-8"))
    return [re.compile(pattern) for pattern in rules["patterns"]]


def inspects_history(action: Action) -> bool:
    """The action runs a command that looks past the checked-out commit (configs/history_commands.toml).

    >>> inspects_history(Action(content="", tool_calls=[ToolCall(id="c", name="bash",
    ...                                                          arguments={"command": "git log --all"})]))
    True
    >>> inspects_history(Action(content="git log --all", tool_calls=[]))
    False
    """
    commands = [call.arguments.get("command") for call in action.tool_calls]
    return any(isinstance(command, str) and pattern.search(command)
               for command in commands for pattern in _history_patterns())


def observation_kind(observation: Observation) -> str:
    """A tool call's outcome kind from what it returned: a wrong call, a time-out or a non-zero exit
    code is an error.

    >>> observation_kind(Observation(tool_call_id="c", name="bash", output="", exit_code=1))
    'error'
    >>> observation_kind(Observation(tool_call_id="c", name="bash", output="ok", exit_code=0))
    'ok'
    """
    failed = observation.error or observation.timed_out or observation.exit_code not in (None, 0)
    return "error" if failed else "ok"


def rollout_outcome(turn: TurnRecord, final: FinalRecord | None) -> dict[str, object]:
    """`metadata.outcome` of a rollout turn: each call's observation (exit code, error), the agent's own
    error about the reply (`unparsed_tool_call`, `truncated_reply`), the episode's reward and exit status.

    >>> call = {"id": "c", "function": {"name": "bash"}}
    >>> t = TurnRecord(turn=0, messages=[], response={"tool_calls": [call]},
    ...                observations=[Observation(tool_call_id="c", name="bash", output="no", exit_code=2)])
    >>> o = rollout_outcome(t, FinalRecord(exit_status="submitted", turns=1, reward=0.0))
    >>> o["kind"], o["calls"][0]["exit_code"], o["reward"], o["exit_status"], o["agent_error"]
    ('error', 2, 0.0, 'submitted', None)
    """
    by_call = {o.tool_call_id: o for o in turn.observations if o.tool_call_id}
    calls = []
    for index, call in enumerate(turn.response.get("tool_calls") or []):
        call_id = call.get("id") or f"call_{index}"
        name = (call.get("function") or {}).get("name") or ""
        seen = by_call.get(call_id)
        if seen is None:
            calls.append(call_outcome(call_id, name, "no_result"))
            continue
        kind = observation_kind(seen)
        error = (seen.error + (": " if seen.output else "") + seen.output if seen.error
                 else seen.output if kind == "error" else None)
        calls.append(call_outcome(call_id, name, kind, error, seen.exit_code))
    agent_error = next((o.error for o in turn.observations if o.error in AGENT_ERRORS), None)
    outcome = turn_outcome(calls, text_kind="error" if agent_error else None,
                           reward=final.reward if final else None,
                           exit_status=final.exit_status if final else None, agent_error=agent_error)
    if agent_error and outcome["kind"] not in ("rejected", "interrupted"):
        outcome["kind"] = "error"   # a reply the agent could not act on failed, whatever its calls did
    return outcome


def parsed_history(messages: list[dict[str, Any]], earlier: dict[int, TurnRecord]) -> list[dict[str, Any]]:
    """The request messages with each reply that went back as generated text (the turn's
    `completion_text`, collect/reply.py `raw_history_message`: no `tool_calls`, the markup in the content)
    shown parsed again: its content and tool calls, as the server returned them. The n-th assistant
    message is turn n's reply.

    >>> done = TurnRecord(turn=0, messages=[], completion_text="<tool_call>x</tool_call>",
    ...                   response={"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]})
    >>> parsed_history([{"role": "user", "content": "u"},
    ...                 {"role": "assistant", "content": "<tool_call>x</tool_call>"}], {0: done})[1]
    {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c'}]}
    """
    out, index = [], 0
    for message in messages:
        if message.get("role") == "assistant":
            turn = earlier.get(index)
            index += 1
            if turn is not None and turn.completion_text is not None and not message.get("tool_calls"):
                message = {key: value for key, value in turn.response.items()
                           if key in ("role", "content", "tool_calls")}
        out.append(message)
    return out


def build_state(header: RolloutHeader, turn: TurnRecord, final: FinalRecord | None, file: str,
                earlier: dict[int, TurnRecord] | None = None) -> TraceState:
    """One TraceState from a turn of a rollout (pure); `earlier`: the rollout's turns by number."""
    action = student_action(turn)
    metadata = {
        "instance_id": header.instance_id, "rollout_id": header.rollout_id, "run_id": header.run_id,
        "repo": header.repo, "image": header.image, "file": file,
        "reward": final.reward if final else None, "resolved": final.resolved if final else None,
        "exit_status": final.exit_status if final else None,
        "finish_reason": turn.finish_reason, "prompt_token_ids": turn.prompt_token_ids,
        "completion_token_ids": turn.completion_token_ids, "logprobs": turn.logprobs,
        # what the logprobs are of: the sampling sent and the server's --logprobs-mode
        "sampling": header.sampling, "logprobs_mode": header.logprobs_mode,
        "inspects_history": inspects_history(action),   # looks for the answer key (collect/answer_key.py)
        "outcome": rollout_outcome(turn, final),
    }
    return TraceState(
        state_id=make_state_id(SOURCE, header.rollout_id, turn.turn), trace_id=header.rollout_id,
        turn=turn.turn, source=SOURCE,
        messages=[to_trace_message(m) for m in parsed_history(turn.messages, earlier or {})],
        tools=header.tools, student_action=action, student_model=header.student_model,
        metadata=metadata)


Records = tuple[RolloutHeader | None, list[TurnRecord], FinalRecord | None]


def read_rollout(path: Path, stats: IngestStats) -> Records:
    name = str(path)
    header: RolloutHeader | None = None
    final: FinalRecord | None = None
    turns: list[TurnRecord] = []
    seen: set[int] = set()
    # The same robust line reader as sessions: a killed run's half line is counted, not fatal.
    for number, record in iter_records(path, stats):
        kind = record.get("type")
        kind = kind if isinstance(kind, str) else "<missing>"
        stats.record_types[kind] += 1
        try:
            if kind == "header" and header is None:
                header = RolloutHeader.model_validate(record)
            elif kind == "turn":
                turn = TurnRecord.model_validate(record)
                if turn.turn in seen:
                    stats.problem(name, number, "duplicate_turn")
                    continue
                seen.add(turn.turn)
                turns.append(turn)
            elif kind == "final":
                final = FinalRecord.model_validate(record)
            else:
                stats.skipped_records[kind] += 1
        except ValidationError:
            stats.problem(name, number, f"invalid_{kind}_record")
    return header, turns, final


def iter_rollout_states(path: Path | str, stats: IngestStats) -> Iterator[TraceState]:
    """The states of one rollout file, in turn order. Bad lines are counted in `stats`, never raised."""
    path = Path(path)
    try:
        header, turns, final = read_rollout(path, stats)
    except OSError:
        stats.problem(str(path), None, "unreadable_file", action="file")
        return
    if header is None or header.format != FORMAT:
        stats.problem(str(path), None, "no_rollout_header", action="file")
        return
    if final is None:   # a run still going, or killed: the turns are good, the reward unknown
        stats.problem(str(path), None, "no_final_record", action="repaired")
    stats.traces += 1
    by_number = {turn.turn: turn for turn in turns}
    for turn in sorted(turns, key=lambda t: t.turn):
        stats.states += 1
        state = build_state(header, turn, final, str(path), by_number)
        if state.metadata["inspects_history"]:
            stats.history["inspects_history"] += 1
        yield state
