"""Ingestion of the real shared sessions: one state per turn, clean histories, compaction, subagents."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats

# Turns per fixture file, by name. Main sessions count their main conversation only; with
# --include-subagents inline sidechains (03) and agent files (04b, 06b/c, 09b/c) count too,
# and the 2.0.x "Warmup" agent (04c) never does.
PINNED_DEFAULT = {
    "fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl": 34,   # 01
    "0d3a8e6f-290f-4105-a327-a2496e5e2a83.jsonl": 15,   # 02
    "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": 10,   # 03
    "cb2e607c-c758-415a-8b45-c49e4631906a.jsonl": 80,   # 04a
    "258c7280-ae70-4798-800f-63464d01a85d.jsonl": 152,  # 06a
    "d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl": 4,    # 07
    "03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl": 9,    # 08
    "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl": 17,   # 09a
    "1cc2775f-83fe-473d-9904-4bcf6297a9a0.jsonl": 6,    # CLI 2.1.330
}
PINNED_SUBAGENTS = {
    **PINNED_DEFAULT,
    "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": 20,   # 03 + its 2 inline sidechains
    "agent-ea02459f.jsonl": 5,                           # 04b
    "agent-a881341.jsonl": 3,                            # 06b
    "agent-acompact-fffbd0.jsonl": 1,                    # 06c
    "agent-a4ca7529859c158c2.jsonl": 20,                 # 09b
    "agent-a52886dc180afb356.jsonl": 15,                 # 09c
}


def independent_turn_count(path: Path, include_subagents: bool) -> int:
    """Count turns straight from the JSON, sharing no code with the ingester."""
    records = []
    for raw in path.read_bytes().splitlines():
        try:
            records.append(json.loads(raw))
        except ValueError:
            continue
    agent_file = path.name.startswith("agent-")
    if agent_file and not include_subagents:
        return 0
    prompts = [r["message"]["content"] for r in records if r.get("type") == "user"]
    if agent_file and prompts and prompts[0] == "Warmup":
        return 0
    has_content: dict[str, bool] = {}
    for r in records:
        message = r.get("message")
        if r.get("type") != "assistant" or not isinstance(message, dict):
            continue
        if r.get("isSidechain") and not include_subagents:
            continue
        if message.get("model") == "<synthetic>" or r.get("isApiErrorMessage"):
            continue
        useful = any(b.get("type") == "tool_use" or (b.get("type") == "text" and b.get("text", "").strip())
                     for b in message.get("content", []))
        has_content[message["id"]] = has_content.get(message["id"], False) or useful
    return sum(has_content.values())


def ingest(root: Path, include_subagents: bool = False) -> tuple[list, IngestStats]:
    stats = IngestStats()
    states = list(iter_states(root, IngestOptions(include_subagents=include_subagents), stats))
    return states, stats


@pytest.mark.parametrize("include_subagents, pinned", [(False, PINNED_DEFAULT), (True, PINNED_SUBAGENTS)])
def test_one_state_per_turn(fixtures_root: Path, include_subagents: bool, pinned: dict[str, int]) -> None:
    states, stats = ingest(fixtures_root, include_subagents)
    per_file = Counter(Path(s.metadata["file"]).name for s in states)
    independent = {p.name: independent_turn_count(p, include_subagents)
                   for p in sorted(fixtures_root.rglob("*.jsonl"))}
    independent = {name: n for name, n in independent.items() if n}
    assert dict(per_file) == independent == pinned
    assert stats.states == len(states) == sum(pinned.values())
    assert len({s.state_id for s in states}) == len(states)


def test_every_state_is_clean(fixtures_root: Path) -> None:
    states, _ = ingest(fixtures_root, include_subagents=True)
    for state in states:
        messages = state.messages
        assert messages[0]["role"] == "system" and "Tools available" in messages[0]["content"]
        called: dict[str, str] = {}
        answered: set[str] = set()
        for message in messages:
            assert set(message) <= {"role", "content", "tool_calls", "tool_call_id", "name"}, message.keys()
            assert isinstance(message["content"], str)  # no thinking / signature blocks survive
            if message["role"] == "assistant":
                for call in message.get("tool_calls", []):
                    assert isinstance(call["function"]["arguments"], dict)
                    called[call["id"]] = call["function"]["name"]
            if message["role"] == "tool":
                assert message["tool_call_id"] in called  # answers an earlier call
                assert message["name"] == called[message["tool_call_id"]]  # templates need the name
                answered.add(message["tool_call_id"])
        assert set(called) == answered
        action = state.student_action
        assert action.content.strip() or action.tool_calls
        assert all(isinstance(c.arguments, dict) for c in action.tool_calls)
        assert state.student_model and state.student_model != "<synthetic>"


def test_thinking_stays_with_the_student_action(fixtures_root: Path) -> None:
    states, _ = ingest(fixtures_root)
    with_thinking = [s for s in states if s.student_action.thinking]
    assert len(with_thinking) > 50
    for state in with_thinking:
        assert state.student_action.thinking not in json.dumps(state.messages)


def test_compaction_keeps_only_the_summary(fixtures_root: Path) -> None:
    path = next(fixtures_root.rglob("258c7280-ae70-4798-800f-63464d01a85d.jsonl"))
    boundary_seen = False
    before: set[str] = set()
    for raw in path.read_bytes().splitlines():
        record = json.loads(raw)
        if record.get("subtype") == "compact_boundary":
            boundary_seen = True
        content = record.get("message", {}).get("content")
        if not boundary_seen and record.get("type") == "user" and isinstance(content, str):
            before.add(content)
    states, _ = ingest(path)
    after = [s for s in states if s.messages[1]["content"].startswith("This session is being continued")]
    assert boundary_seen and after and len(after) < len(states)
    for state in after:
        texts = {m["content"] for m in state.messages if m["role"] == "user"}
        assert not texts & before, "a state after the boundary holds pre-compaction prompts"
        assert "Implement spotter-gqc" not in texts


def test_subagents_are_their_own_traces(fixtures_root: Path) -> None:
    _, skipped = ingest(fixtures_root)
    states, stats = ingest(fixtures_root, include_subagents=True)
    assert skipped.skipped_traces["subagent"] == 8  # 6 agent files (04c warmup too) + 2 inline sidechains
    traces = {s.trace_id for s in states}
    assert len([t for t in traces if "/sidechain-" in t]) == 2
    agent_traces = {t.split("/agent-")[1] for t in traces if "/agent-" in t}
    assert agent_traces == {"ea02459f", "a881341", "acompact-fffbd0",
                            "a4ca7529859c158c2", "a52886dc180afb356"}
    assert stats.skipped_traces["warmup"] == 1
    sidechain_state = next(s for s in states if "/sidechain-" in s.trace_id)
    assert sidechain_state.messages[1]["content"].startswith("Examine the package.json")


def test_recorded_tool_shapes_win(fixtures_root: Path) -> None:
    states, _ = ingest(next(fixtures_root.rglob("1cc2775f-83fe-473d-9904-4bcf6297a9a0.jsonl")))
    names = [t["function"]["name"] for t in states[0].tools]
    assert "Agent" in names and "Skill" in names
    bash = next(t for t in states[0].tools if t["function"]["name"] == "Bash")
    assert "dangerouslyDisableSandbox" in bash["function"]["parameters"]["properties"]
    assert "$schema" not in bash["function"]["parameters"]


def test_unknown_tools_get_inferred_schemas(fixtures_root: Path) -> None:
    states, _ = ingest(next(fixtures_root.rglob("ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl")))
    tools = {t["function"]["name"]: t for t in states[0].tools}
    assert "TaskCreate" in tools and "Bash" in tools
    assert all(t["type"] == "function" for t in tools.values())
