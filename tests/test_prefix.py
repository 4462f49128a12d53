"""Cacheable prefixes: within a trace, each state's request (tools, system prompt, messages, as they are
serialised, in order) extends the previous state's request exactly, so a provider's prompt cache serves
all of it but the new turn. Checked over every fixture trace, on the requests teachers really receive.

Where it cannot hold, the session itself changed under the trace, and each case is named here:
- `compaction`: the context was summarised; the new context (system prompt + summary) starts afresh;
- `rewind`: the user edited an earlier prompt; the history is the new branch from that message on;
- `trim`: the context budget dropped old exchanges (the trimming policy and its step size are
  ingestion/budget.py's; every trim shows as the earlier request with one block of exchanges removed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from teachers.redact_state import StateRedactor
from teachers.request import build_request
from tests.sessions import assistant, text, tool_result, tool_use, user, write_session

COMPACTED = "This session is being continued from a previous conversation"
# Every break in the shared fixtures, with what the session did there (trims are recognised by shape).
KNOWN = {("03eb5929-52b3-4b13-ada3-b93ae35806b8", 6): "rewind",
         ("258c7280-ae70-4798-800f-63464d01a85d", 102): "compaction"}


def wire(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[bytes]:
    """The request as bytes, block by block in the order providers cache it (key order kept)."""
    return [orjson.dumps(tools), *(orjson.dumps(m) for m in messages)]


def classify(before: list[bytes], after: list[bytes]) -> str:
    """Why `after` does not extend `before`."""
    opening = orjson.loads(after[2]).get("content", "") if len(after) > 2 else ""
    if before[2:3] != after[2:3] and COMPACTED in opening:
        return "compaction"
    first = next(i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b)
    # blocks: [tools, system, first user message, ...]; trimming keeps the first three
    kept = range(first + 1, len(before))
    if first >= 3 and any(before[k:] == after[first:first + len(before) - k] for k in kept):
        return "trim"
    roles = {orjson.loads(before[first]).get("role"), orjson.loads(after[first]).get("role")}
    return "rewind" if roles == {"user"} else f"broken at block {first}"


def breaks(source: Path, options: IngestOptions) -> tuple[int, dict[tuple[str, int], str]]:
    """(pairs of consecutive states compared, {(trace, turn): why} for those that do not extend)."""
    last: dict[str, list[bytes]] = {}
    pairs, found = 0, {}
    redactor = StateRedactor(b"prefix-test-key")  # as replay.pipeline redacts each state
    for state in iter_states(source, options, IngestStats()):
        messages, tools = build_request(redactor(state))
        request = wire(messages, tools)
        before = last.get(state.trace_id)
        last[state.trace_id] = request
        if before is None:
            continue
        pairs += 1
        if request[:len(before)] != before:
            found[(state.trace_id.split("/")[0], state.turn)] = classify(before, request)
    return pairs, found


def test_every_fixture_trace_extends_its_previous_request(fixtures_root: Path) -> None:
    pairs, found = breaks(fixtures_root, IngestOptions(include_subagents=True))
    assert pairs > 300
    assert found == KNOWN


def test_a_trimmed_trace_breaks_only_where_it_trims(fixtures_root: Path) -> None:
    pairs, found = breaks(fixtures_root, IngestOptions(max_prompt_tokens=30_000))
    trims = {key for key, why in found.items() if why == "trim"}
    assert trims and {key: why for key, why in found.items() if key not in trims} == KNOWN


def test_a_session_past_midnight_keeps_its_system_prompt(tmp_path: Path) -> None:
    records = [user("u1", None, "list the files", ts="2025-11-17T23:59:00.000Z"),
               assistant("a1", "u1", "msg_1", tool_use("toolu_1", "ls"), ts="2025-11-17T23:59:30.000Z"),
               user("u2", "a1", tool_result("toolu_1", "a.py"), ts="2025-11-18T00:00:10.000Z",
                    gitBranch="fix"),
               assistant("a2", "u2", "msg_2", text("One file."), ts="2025-11-18T00:00:20.000Z",
                         gitBranch="fix")]
    first, second = iter_states(write_session(tmp_path, records), IngestOptions(), IngestStats())
    assert first.metadata["timestamp"][:10] != second.metadata["timestamp"][:10]  # the turns' own dates
    assert first.messages[0] == second.messages[0] and "2025-11-17" in first.messages[0]["content"]
    assert second.messages[:len(first.messages)] == first.messages
