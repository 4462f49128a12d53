"""Claude Code session files → TraceStates, one per assistant turn (ingestion rules 2–10).

Trace ids come from the records, not the file's name: a main conversation is its `sessionId`, a
subagent `<sessionId>/agent-<agentId>`, a 1.0.x inline sidechain `<sessionId>/sidechain-<root uuid>`;
only a file whose records carry no sessionId falls back to the session folder it lies in
(`<session>/subagents/`), else to a hash of its path. So a state's id depends on its own session
alone, whatever a file is called — unless an earlier file of the run gave that trace id other
content (a copied or restored session): then the trace takes a distinct id (ids.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestion.budget import Budget, count_fit
from ingestion.claude_code.agents import (
    agent_id_of,
    folder_session,
    is_fork_start,
    is_side_file,
    is_subagent_file,
    path_trace_id,
    read_meta,
)
from ingestion.claude_code.convert import is_turn
from ingestion.claude_code.history import HistoryBuilder, MessageCache
from ingestion.claude_code.outcome import SessionOutcomes
from ingestion.claude_code.session import Group, Node, Session, load_session
from ingestion.claude_code.tools import recorded_tools, trace_tools
from ingestion.ids import Claim, Grant, Seen
from ingestion.options import IngestOptions
from ingestion.prompt import system_message, trace_environment
from ingestion.schema import TraceState, make_state_id
from ingestion.stats import IngestStats

SOURCE = "claude_code"


@dataclass
class Trace:
    trace_id: str
    session_id: str
    sidechain: bool
    groups: list[Group] = field(default_factory=list)
    agent_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def session_states(path: Path, options: IngestOptions, stats: IngestStats,
                   seen: Seen) -> Iterator[TraceState]:
    """Every state of one session file; `seen` carries message and state ids across files."""
    if is_side_file(path):
        stats.problem(str(path), None, "not_a_transcript", action="file")
        return
    subagent_file = is_subagent_file(path)
    if subagent_file and not options.include_subagents:
        stats.skipped_traces["subagent"] += 1
        return
    try:
        session = load_session(path, stats)
    except OSError as error:   # gone or locked since the source was listed
        stats.problem(str(path), None, "unreadable_file", action="file", detail=error.strerror or str(error))
        return
    if not session.nodes:
        stats.problem(str(path), None, "no_conversation", action="file")
        return
    meta = read_meta(path, stats) if subagent_file else {}
    history = HistoryBuilder(session, MessageCache(session, options.message_limit(), stats), stats)
    budget = Budget(options)
    outcomes = SessionOutcomes(session)
    traces = _traces(session, path, subagent_file, meta)
    plans = [(trace, *_plan(session, trace, options)) for trace in traces]
    # Every trace of the file asks for its ids at once, before any state is built (ids.Seen.claim).
    grants = iter(seen.claim([Claim(SOURCE, trace.trace_id, [(n, g.key) for n, g in enumerate(turns)])
                              for trace, skip, turns, _ in plans if skip is None], last=True))
    for trace, skip, turns, skipped in plans:
        if skip is not None:
            stats.skipped_traces[skip] += 1
            continue
        stats.traces += 1
        for state in _trace_states(session, trace, turns, skipped, next(grants), history, budget, stats):
            state.metadata["outcome"] = outcomes.of(session.groups[state.metadata["message_id"]])
            yield state


def _traces(session: Session, path: Path, subagent_file: bool, meta: dict[str, Any]) -> list[Trace]:
    """Turns grouped by trace: the main conversation (per sessionId), each inline sidechain, the agent."""
    traces: dict[str, Trace] = {}
    roots: dict[str, str] = {}
    file_session = session.session_id or folder_session(path) or path_trace_id(path)
    for group in session.groups.values():
        first = group.first
        session_id = first.envelope.get("sessionId") or file_session
        agent_id = None
        if subagent_file:
            agent_id = first.envelope.get("agentId") or agent_id_of(path)
            trace_id = f"{session_id}/agent-{agent_id}"
        elif first.sidechain:
            trace_id = f"{session_id}/sidechain-{_root(session, first, roots)}"
        else:
            trace_id = session_id
        trace = traces.get(trace_id)
        if trace is None:
            trace = traces[trace_id] = Trace(trace_id, session_id, subagent_file or first.sidechain,
                                             agent_id=agent_id, meta=meta if subagent_file else {})
        trace.groups.append(group)
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


def _plan(session: Session, trace: Trace,
          options: IngestOptions) -> tuple[str | None, list[Group], list[str]]:
    """Why a trace gives no state at all (`skipped_traces`), or None and its turns (`_turns`)."""
    if trace.sidechain and not options.include_subagents:
        return "subagent", [], []
    if _is_warmup(session, trace):
        return "warmup", [], []
    return None, *_turns(session, trace)


def _turns(session: Session, trace: Trace) -> tuple[list[Group], list[str]]:
    """The trace's turns (numbered from 0 in this order), and why each other response is none."""
    turns: list[Group] = []
    skipped: list[str] = []
    fork_start = _fork_start(session, trace)
    for group in trace.groups:
        if group.synthetic:
            skipped.append("api_error")
        elif not is_turn(group.action):
            skipped.append("no_text_or_tool_use")
        elif group.first.seq < fork_start:
            skipped.append("fork_inherited")   # the parent's turn, copied into the fork
        else:
            turns.append(group)
    return turns, skipped


def _trace_states(session: Session, trace: Trace, turns: list[Group], skipped: list[str], grant: Grant,
                  history: HistoryBuilder, budget: Budget, stats: IngestStats) -> Iterator[TraceState]:
    for reason in skipped:
        stats.skipped_turns[reason] += 1
    tools = _tools_at(session, turns)
    # The system prompt is the trace's, from its first turn: a date (or branch) that moved mid-session
    # would change the first message of every later request, and providers cache prompts by prefix.
    opening = turns[0].first.envelope if turns else {}
    # Numbered before dedup so a state keeps its id whichever files a run reads.
    if len(grant.turns) < len(turns):
        stats.skipped_turns["duplicate_message_id"] += len(turns) - len(grant.turns)
    if not grant.turns:
        return
    if grant.trace_id != trace.trace_id:
        stats.trace_id_collisions += 1
        trace.trace_id = grant.trace_id
    system = system_message(trace_environment(opening), tools)   # one object: every state's first message
    for turn in grant.turns:
        stats.states += 1
        yield _state(session, trace, turn, turns[turn], tools, history, budget, stats, system)


def _fork_start(session: Session, trace: Trace) -> int:
    """Where a fork subagent's own work starts (file position), or -1: turns before it are inherited."""
    if trace.agent_id is None or not trace.groups:
        return -1
    for node in session.nodes.values():
        if node.type == "user" and node.sidechain and is_fork_start(node.content):
            return node.seq
    return -1


def _tools_at(session: Session, turns: list[Group]) -> list[dict[str, Any]]:
    """One tool list per trace: recorded request shapes (CLI 2.1.3xx) win over the default set."""
    return trace_tools((call for g in turns for call in g.action.tool_calls),
                       recorded_tools(tools for _seq, tools in session.shapes))


def _state(session: Session, trace: Trace, turn: int, group: Group, tools: list[dict[str, Any]],
           history: HistoryBuilder, budget: Budget, stats: IngestStats,
           system: dict[str, str]) -> TraceState:
    first = group.first
    envelope = first.envelope
    metadata: dict[str, Any] = {
        "cwd": envelope.get("cwd"), "git_branch": envelope.get("gitBranch"),
        "timestamp": envelope.get("timestamp"), "version": envelope.get("version"),
        "file": session.file or str(session.path), "line": first.line, "message_id": group.key,
        "request_id": group.request_id, "session_id": trace.session_id,
    }
    if trace.sidechain:
        metadata["agent_id"] = trace.agent_id or envelope.get("agentId")
        metadata.update(trace.meta)
    before, chars = history.build(group)  # characters: an upper bound for the budget's estimate
    messages = [system, *before]
    action = group.action.to_message() if budget.max_length else None   # counted against max_length only
    messages, dropped, over = budget.fit(messages, tools, action, chars=chars + len(system["content"]))
    count_fit(stats, budget, dropped, over)
    if dropped:  # the trim point: it moved between two states of a trace iff this count differs
        metadata["dropped_messages"] = dropped
    # Every field is built above from typed parts (Action is validated); re-validating each of the
    # hundreds of history messages of every state cost a fifth of ingestion.
    return TraceState.model_construct(
        state_id=make_state_id(SOURCE, trace.trace_id, turn), trace_id=trace.trace_id, turn=turn,
        source=SOURCE, messages=messages, tools=tools, student_action=group.action,
        student_model=group.model, metadata=metadata)
