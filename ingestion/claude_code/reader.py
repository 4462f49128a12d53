"""Claude Code session files → TraceStates, one per assistant turn (ingestion rules 2–10)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestion.budget import Budget, count_fit
from ingestion.claude_code.convert import is_turn
from ingestion.claude_code.history import HistoryBuilder, MessageCache
from ingestion.claude_code.session import Group, Node, Session, load_session
from ingestion.claude_code.tools import recorded_tools, trace_tools
from ingestion.options import IngestOptions
from ingestion.prompt import system_message
from ingestion.schema import TraceState, make_state_id
from ingestion.stats import IngestStats

SOURCE = "claude_code"


@dataclass
class Trace:
    trace_id: str
    sidechain: bool
    groups: list[Group] = field(default_factory=list)


def is_subagent_file(path: Path) -> bool:
    return path.name.startswith("agent-")


def session_states(path: Path, options: IngestOptions, stats: IngestStats,
                   seen_messages: set[str]) -> Iterator[TraceState]:
    """Every state of one session file; `seen_messages` carries message ids across files."""
    subagent_file = is_subagent_file(path)
    if subagent_file and not options.include_subagents:
        stats.skipped_traces["subagent"] += 1
        return
    session = load_session(path, stats)
    if not session.nodes:
        stats.problem(str(path), None, "no_conversation", action="file")
        return
    history = HistoryBuilder(session, MessageCache(session, options.message_limit(), stats), stats)
    budget = Budget(options)
    for trace in _traces(session, path, subagent_file):
        if trace.sidechain and not options.include_subagents:
            stats.skipped_traces["subagent"] += 1
            continue
        if _is_warmup(session, trace):
            stats.skipped_traces["warmup"] += 1
            continue
        stats.traces += 1
        yield from _trace_states(session, trace, history, budget, stats, seen_messages)


def _traces(session: Session, path: Path, subagent_file: bool) -> list[Trace]:
    """Turns grouped by trace: the main conversation, each inline sidechain, or the agent file."""
    traces: dict[str, Trace] = {}
    roots: dict[str, str] = {}
    agent_id = path.stem.removeprefix("agent-")
    for group in session.groups.values():
        first = group.first
        if subagent_file:
            session_id = first.envelope.get("sessionId") or path.parent.parent.name
            trace_id = f"{session_id}/agent-{agent_id}"
        elif first.sidechain:
            trace_id = f"{path.stem}/sidechain-{_root(session, first, roots)}"
        else:
            trace_id = path.stem
        traces.setdefault(trace_id, Trace(trace_id, subagent_file or first.sidechain)).groups.append(group)
    return list(traces.values())


def _root(session: Session, node: Node, memo: dict[str, str]) -> str:
    path: list[str] = []
    current: Node | None = node
    root = node.uuid
    while current is not None and current.uuid not in path:
        if current.uuid in memo:
            root = memo[current.uuid]
            break
        path.append(current.uuid)
        root = current.uuid
        current = session.nodes.get(current.parent) if current.parent else None
    for uuid in path:
        memo[uuid] = root
    return root


def _is_warmup(session: Session, trace: Trace) -> bool:
    """CLI 2.0.x wrote a "Warmup" agent file at every start; it is no real work."""
    if not trace.sidechain or not trace.groups:
        return False
    first = trace.groups[0].first
    prompts = [n for n in session.nodes.values()
               if n.type == "user" and n.seq < first.seq and n.sidechain and isinstance(n.content, str)]
    return bool(prompts) and prompts[0].content.strip() == "Warmup"


def _trace_states(session: Session, trace: Trace, history: HistoryBuilder, budget: Budget,
                  stats: IngestStats, seen_messages: set[str]) -> Iterator[TraceState]:
    turns: list[Group] = []
    for group in trace.groups:
        if group.synthetic:
            stats.skipped_turns["api_error"] += 1
        elif not is_turn(group.action):
            stats.skipped_turns["no_text_or_tool_use"] += 1
        else:
            turns.append(group)
    tools = _tools_at(session, turns)
    for turn, group in enumerate(turns):
        # Numbered before dedup so a state keeps its id whichever files a run reads.
        if group.key in seen_messages:
            stats.skipped_turns["duplicate_message_id"] += 1
            continue
        seen_messages.add(group.key)
        stats.states += 1
        yield _state(session, trace, turn, group, tools, history, budget, stats)


def _tools_at(session: Session, turns: list[Group]) -> list[dict[str, Any]]:
    """One tool list per trace: recorded request shapes (CLI 2.1.3xx) win over the default set."""
    return trace_tools((call for g in turns for call in g.action.tool_calls),
                       recorded_tools(tools for _seq, tools in session.shapes))


def _state(session: Session, trace: Trace, turn: int, group: Group, tools: list[dict[str, Any]],
           history: HistoryBuilder, budget: Budget, stats: IngestStats) -> TraceState:
    first = group.first
    envelope = first.envelope
    metadata: dict[str, Any] = {
        "cwd": envelope.get("cwd"), "git_branch": envelope.get("gitBranch"),
        "timestamp": envelope.get("timestamp"), "version": envelope.get("version"),
        "file": str(session.path), "line": first.line, "message_id": group.key,
        "request_id": group.request_id,
    }
    if trace.sidechain:
        metadata["agent_id"] = envelope.get("agentId")
    before, chars = history.build(group)
    system = system_message(metadata, tools)
    messages = [system, *before]
    messages, dropped, over = budget.fit(messages, tools, group.action.to_message(),
                                         chars=chars + len(system["content"]))
    count_fit(stats, budget, dropped, over)
    if dropped:  # the trim point: it moved between two states of a trace iff this count differs
        metadata["dropped_messages"] = dropped
    # Every field is built above from typed parts (Action is validated); re-validating each of the
    # hundreds of history messages of every state cost a fifth of ingestion.
    return TraceState.model_construct(
        state_id=make_state_id(SOURCE, trace.trace_id, turn), trace_id=trace.trace_id, turn=turn,
        source=SOURCE, messages=messages, tools=tools, student_action=group.action,
        student_model=group.model, metadata=metadata)
