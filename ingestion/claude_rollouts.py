"""Claude Code rollouts (`collect.run --agent claude-code`) → TraceStates: each session turn joined to
the proxy record of the request that produced it.

A rollout folder DIR/<instance_id>/ holds `rollout.jsonl` (header; final with the reward),
`proxy.jsonl` (one record per Messages request, ingestion/rollout_format.py) and
`claude/projects/**/<session>.jsonl` (what the CLI wrote). The session is read by the Claude Code
reader like any other (history, tools, one state per turn). Each turn is then matched by its
`message.id`, which the proxy chose (`msg_<record id>`), and gets the record's token ids and logprobs
and the rollout's reward. Side requests (titles, summaries, the low model) are not session turns; a
turn that matches one all the same is dropped and counted (`skipped_turns["side_request"]`).

The states:
- `source` is "swebench_rollout", as for every collected rollout, whichever agent ran.
- `trace_id` is the rollout id; a subagent's trace is `<rollout id>/agent-<id>`.
- `student_model` is the served model of the matched record (else the header's), and `student_action`
  what the student generated as the record has it (the session's copy has the CLI's defaults added).
- `messages` are the reader's (synthetic system prompt, rule 7). The exact request the student saw
  (Claude Code's own system prompt, the translated messages) is the record's `request`, and
  `prompt_token_ids` are its tokens: metadata `proxy_record` names it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingestion.claude_code.reader import session_states
from ingestion.ids import Seen
from ingestion.options import IngestOptions
from ingestion.rollout_format import FinalRecord, ProxyRecord, RolloutHeader, read_proxy_records
from ingestion.rollouts import inspects_history, parse_arguments, read_rollout
from ingestion.schema import Action, ToolCall, TraceState, make_state_id
from ingestion.stats import IngestStats

SOURCE = "swebench_rollout"
ROLLOUT_FILE, PROXY_FILE, SESSIONS = "rollout.jsonl", "proxy.jsonl", ("claude", "projects")
MAX_DEPTH = 8                          # claude/projects/<project>/<session>/subagents/agent-x.jsonl


def rollout_folder(path: Path) -> Path | None:
    """The claude-code rollout folder `path` lies in (rollout.jsonl and proxy.jsonl side by side), or None."""
    # Asked of every file a run reads: string paths and os.stat, a third of pathlib's cost.
    parent = os.path.dirname(os.fspath(path))
    for _ in range(MAX_DEPTH):
        if (os.path.isfile(os.path.join(parent, PROXY_FILE))
                and os.path.isfile(os.path.join(parent, ROLLOUT_FILE))):
            return Path(parent)
        up = os.path.dirname(parent)
        if up == parent:
            return None
        parent = up
    return None


def is_session_path(path: Path, folder: Path) -> bool:
    """A session file of the rollout, not one of the collector's own files.

    >>> is_session_path(Path("r/claude/projects/-testbed/s.jsonl"), Path("r"))
    True
    >>> is_session_path(Path("r/proxy.jsonl"), Path("r")), is_session_path(Path("r/rollout.jsonl"), Path("r"))
    (False, False)
    """
    return path.relative_to(folder).parts[:2] == SESSIONS


def join_state(state: TraceState, header: RolloutHeader, final: FinalRecord | None,
               record: ProxyRecord | None) -> TraceState:
    """A Claude Code session state as a rollout state, with the record's tokens (pure)."""
    session_id, _, rest = state.trace_id.partition("/")
    trace_id = f"{header.rollout_id}/{rest}" if rest else header.rollout_id
    action = record_action(record) if record and record.response else state.student_action
    metadata: dict[str, Any] = {
        **state.metadata, "agent": "claude-code", "session_id": session_id,
        "instance_id": header.instance_id, "rollout_id": header.rollout_id, "run_id": header.run_id,
        "repo": header.repo, "image": header.image,
        "reward": final.reward if final else None, "resolved": final.resolved if final else None,
        "exit_status": final.exit_status if final else None,
        "proxy_record": record.id if record else None,
        "finish_reason": record.finish_reason if record else None,
        "prompt_token_ids": record.prompt_token_ids if record else None,
        "completion_token_ids": record.completion_token_ids if record else None,
        "logprobs": record.logprobs if record else None,
        "latency_s": record.latency_s if record else None,
        "sampling": header.sampling, "logprobs_mode": header.logprobs_mode,
        "inspects_history": inspects_history(action),
    }
    if isinstance(state.metadata.get("outcome"), dict):   # the session's per-call outcome + the episode's
        metadata["outcome"] = {**state.metadata["outcome"], "reward": metadata["reward"],
                               "exit_status": metadata["exit_status"]}
    return state.model_copy(update={
        "state_id": make_state_id(SOURCE, trace_id, state.turn), "trace_id": trace_id, "source": SOURCE,
        "student_model": record.backend_model if record else header.student_model, "metadata": metadata,
        "student_action": action})


def record_action(record: ProxyRecord) -> Action:
    """What the student generated, as the proxy received it: the CLI writes tool inputs with its own
    defaults filled in (Edit's `replace_all: false`), which the completion tokens do not contain.

    >>> record = ProxyRecord(id="a", message_id="msg_a", request_id="req_a", role="main", model="m",
    ...     backend_model="s", started_at="t", request={}, reasoning="hm", response={"content": "ok",
    ...     "tool_calls": [{"id": "c", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}]})
    >>> action = record_action(record)
    >>> action.tool_calls, action.thinking
    ([ToolCall(id='c', name='Bash', arguments={'command': 'ls'})], 'hm')
    """
    response = record.response or {}
    calls = []
    for index, call in enumerate(response.get("tool_calls") or []):
        function = call.get("function") or {}
        calls.append(ToolCall(id=call.get("id") or f"call_{index}", name=function.get("name") or "",
                              arguments=parse_arguments(function.get("arguments"))))
    content = response.get("content")
    return Action(content=content if isinstance(content, str) else "", tool_calls=calls,
                  thinking=record.reasoning)


def _read_rollout(path: Path, stats: IngestStats) -> tuple[RolloutHeader | None, FinalRecord | None]:
    """Header and final record, through the mini agent's rollout reader; only its problems are kept,
    since the file is read once per session file of the folder, not as a source of its own."""
    scratch = IngestStats()
    try:
        header, _, final = read_rollout(path, scratch)
    except OSError:
        return None, None
    for problem in scratch.problems:
        stats.problem(problem["file"], problem["line"], problem["reason"], problem["action"])
    return header, final


def iter_claude_rollout_states(path: Path, options: IngestOptions, stats: IngestStats,
                               seen: Seen) -> Iterator[TraceState]:
    """The states of one session file of a claude-code rollout; the folder's other files yield nothing."""
    folder = rollout_folder(path)
    if folder is None or not is_session_path(path, folder):
        return
    header, final = _read_rollout(folder / ROLLOUT_FILE, stats)
    if header is None:
        stats.problem(str(path), None, "no_rollout_header", action="file")
        return
    if final is None:   # a run still going, or killed: the turns are good, the reward unknown
        stats.problem(str(path), None, "no_final_record", action="repaired")
    records, bad = read_proxy_records(folder / PROXY_FILE)
    if bad:
        stats.skipped_lines["invalid_proxy_record"] += bad
    by_message = {record.message_id: record for record in records}
    for state in session_states(path, options, stats, seen):
        record = by_message.get(state.metadata.get("message_id") or "")
        if record is not None and record.role != "main":
            stats.states -= 1          # counted by the reader, taken back: side requests are no states
            stats.skipped_turns["side_request"] += 1
            continue
        if record is None:
            stats.problem(str(path), state.metadata.get("line"), "no_proxy_record", action="repaired")
        joined = join_state(state, header, final, record)
        if joined.metadata["inspects_history"]:
            stats.history["inspects_history"] += 1
        yield joined
