"""Outcomes and recoveries of Claude Code states (#25 items 1–2), against an independent count.

The oracle below reads the raw JSONL itself, with the rules of the issue written out again here
(not read from configs/ nor from the reader): a call's result is found by `tool_use_id` anywhere in
the file; the CLI's rejection / interrupt wordings win over `is_error`; `is_error` is an error unless a
parallel sibling caused it; no result is `no_result`; the turn is its worst call; a text turn is
interrupted / rejected when a user record right after it (through system / attachment / progress
records) says so.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from tests.sessions import assistant, system, text, tool_result, tool_use, user, write_session

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "sessions"
REJECT = ("The user doesn't want to proceed with this tool use", "The user doesn't want to take this action",
          "Permission for this tool use was denied", "User rejected tool use")
INTERRUPT = ("[Request interrupted by user", "Interrupted by user")
SIBLING = ("Sibling tool call errored", "Error: Streaming fallback")
RANK = ["no_result", "ok", "error", "interrupted", "rejected"]


def _words(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict)
                         and part.get("type") == "text")
    return ""


def _said(words: str) -> str | None:
    words = words.strip()
    if any(words.startswith(w) for w in REJECT):
        return "rejected"
    if any(words.startswith(w) for w in INTERRUPT):
        return "interrupted"
    return None


def oracle(path: Path) -> dict[str, str]:
    """message.id → the turn's outcome kind, straight from the file."""
    records = []
    for line in path.read_bytes().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    results: dict[str, dict[str, Any]] = {}
    children: dict[str, list[dict[str, Any]]] = {}
    blocks: dict[str, list[dict[str, Any]]] = {}
    uuids: dict[str, set[str]] = {}
    for record in records:
        if record.get("parentUuid"):
            children.setdefault(record["parentUuid"], []).append(record)
        message = record.get("message") if isinstance(record.get("message"), dict) else {}
        content = message.get("content")
        if record.get("type") == "user" and isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "tool_result":
                    results.setdefault(str(part.get("tool_use_id")), part)
        if record.get("type") == "assistant" and isinstance(content, list):
            key = message.get("id") or record.get("uuid")
            blocks.setdefault(key, []).extend(b for b in content if isinstance(b, dict))
            uuids.setdefault(key, set()).add(record.get("uuid"))
    kinds = {}
    for key, parts in blocks.items():
        calls = [b for b in parts if b.get("type") == "tool_use"]
        if not calls:
            kinds[key] = _text_turn(uuids[key], children) or "ok"
            continue
        found = []
        for call in calls:
            result = results.get(str(call.get("id")))
            if result is None:
                found.append("no_result")
                continue
            body = result.get("content")
            words = body if isinstance(body, str) else "\n".join(
                p.get("text", "") if isinstance(p, dict) and p.get("type") == "text" else
                "[image]" for p in body or [])
            said = _said(re.sub(r"^Exit code -?[0-9]+\n", "", words))
            if said:
                found.append(said)
            elif result.get("is_error") is True:
                own = not any(s in words[:80] for s in SIBLING)
                found.append("error" if own else "no_result")
            else:
                found.append("ok")
        kinds[key] = max(found, key=RANK.index)
    return kinds


def _text_turn(own: set[str], children: dict[str, list[dict[str, Any]]]) -> str | None:
    queue = [c for u in own for c in children.get(u, []) if c.get("uuid") not in own]
    while queue:
        record = queue.pop(0)
        if record.get("type") == "user":
            said = _said(_words((record.get("message") or {}).get("content")))
            if said:
                return said
        elif record.get("type") in ("system", "attachment", "progress"):
            queue.extend(children.get(record.get("uuid"), []))
    return None


def _states(source: Path) -> list[Any]:
    return list(iter_states(source, IngestOptions(include_subagents=True), IngestStats()))


@pytest.mark.parametrize("where", ["fixtures", "examples"])
def test_outcome_counts_equal_an_independent_count(where: str, fixtures_root: Path) -> None:
    source = fixtures_root if where == "fixtures" else EXAMPLES
    states = _states(source)
    expected: dict[tuple[str, str], str] = {}
    for path in sorted(source.rglob("*.jsonl")):
        for key, kind in oracle(path).items():
            expected[(str(path), key)] = kind
    got = Counter(s.metadata["outcome"]["kind"] for s in states)
    want = Counter(expected[(s.metadata["file"], s.metadata["message_id"])] for s in states)
    assert got == want
    mismatched = [(s.state_id, s.metadata["outcome"]["kind"]) for s in states
                  if s.metadata["outcome"]["kind"] != expected[s.metadata["file"], s.metadata["message_id"]]]
    assert mismatched == []
    if where == "fixtures":   # every version's wording was recognised: 1.0.43, 2.0.37 and 2.1.39 reject
        versions = {s.metadata["version"] for s in states if s.metadata["outcome"]["kind"] == "rejected"}
        assert {"1.0.43", "2.0.37", "2.1.39"} <= versions
        assert got["error"] > 0 and got["rejected"] == 6
    else:
        assert got["error"] >= 1


def test_failed_states_name_their_recovery(fixtures_root: Path) -> None:
    states = _states(fixtures_root)
    by_trace: dict[str, list[Any]] = {}
    for state in states:
        by_trace.setdefault(state.trace_id, []).append(state)
    failed = 0
    for trace in by_trace.values():
        for here, after in zip(trace, [*trace[1:], None], strict=True):
            kind = here.metadata["outcome"]["kind"]
            if kind in ("error", "rejected", "interrupted"):
                failed += 1
                assert here.metadata.get("recovery") == (after.state_id if after else None)
            else:
                assert "recovery" not in here.metadata
    assert failed > 20


def test_error_heads_exit_codes_and_edge_cases(tmp_path: Path) -> None:
    """Text-turn interrupts, a sibling's error, a call without result, Bash's exit code."""
    sibling = [{"type": "tool_result", "tool_use_id": "t3", "is_error": True,
                "content": "<tool_use_error>Sibling tool call errored</tool_use_error>"}]
    failing = [{"type": "tool_result", "tool_use_id": "t2", "is_error": True, "content": "Exit code 2\nboom"}]
    records = [
        user("u1", None, "go"),
        assistant("a1", "u1", "msg_1", text("Thinking out loud")),
        system("s1", "a1", "stop_hook_summary"),
        user("u2", "s1", [text("[Request interrupted by user]")]),
        assistant("a2", "u2", "msg_2", tool_use("t2", "make")),
        assistant("a3", "a2", "msg_2", tool_use("t3", "ls")),
        user("u3", "a3", failing + sibling),
        assistant("a4", "u3", "msg_3", tool_use("t4", "ls")),
        user("u4", "a4", tool_result("t4", "fine")),
        assistant("a5", "u4", "msg_4", tool_use("t5", "sleep 9")),
        user("u5", "a5", [{"type": "tool_result", "tool_use_id": "t5", "is_error": True,
                           "content": "Exit code 137\n[Request interrupted by user for tool use]"}]),
        assistant("a6", "u5", "msg_5", tool_use("t6", "sleep 1")),
    ]
    path = write_session(tmp_path / "p", records)
    states = _states(path)
    outcomes = [s.metadata["outcome"] for s in states]
    assert [o["kind"] for o in outcomes] == ["interrupted", "error", "ok", "interrupted", "no_result"]
    assert [o["kind"] for o in outcomes] == [oracle(path)[f"msg_{i}"] for i in range(1, 6)]
    assert outcomes[3]["calls"][0]["exit_code"] == 137
    calls = outcomes[1]["calls"]
    assert [(c["kind"], c["exit_code"]) for c in calls] == [("error", 2), ("no_result", None)]
    assert calls[0]["error"] == "Exit code 2\nboom"
    recoveries = [s.metadata.get("recovery") for s in states]
    assert recoveries == [states[1].state_id, states[2].state_id, None, states[4].state_id, None]


def test_rollout_turns_exit_codes_agent_errors_and_episode() -> None:
    from ingestion.rollout_format import FinalRecord, Observation, TurnRecord
    from ingestion.rollouts import rollout_outcome

    def call(i: int) -> dict[str, Any]:
        return {"id": f"c{i}", "function": {"name": "bash", "arguments": "{}"}}

    final = FinalRecord(exit_status="max_turns", turns=3, reward=0.0)
    ran = TurnRecord(turn=0, messages=[], response={"tool_calls": [call(0), call(1), call(2)]}, observations=[
        Observation(tool_call_id="c0", name="bash", output="fine", exit_code=0),
        Observation(tool_call_id="c1", name="bash", output="", exit_code=None, timed_out=True)])
    outcome = rollout_outcome(ran, final)
    assert [(c["kind"], c["exit_code"]) for c in outcome["calls"]] == [("ok", 0), ("error", None),
                                                                       ("no_result", None)]
    assert (outcome["kind"], outcome["reward"], outcome["exit_status"]) == ("error", 0.0, "max_turns")
    cut = TurnRecord(turn=1, messages=[], response={"tool_calls": [call(3)]}, observations=[
        Observation(tool_call_id="c3", name="bash", output="cut at 64 tokens", error="truncated_reply")])
    assert (rollout_outcome(cut, None)["agent_error"], rollout_outcome(cut, None)["kind"]) == (
        "truncated_reply", "error")
    said = TurnRecord(turn=2, messages=[], response={"content": "done"})
    assert rollout_outcome(said, final)["kind"] == "ok"


def test_claude_code_rollout_states_keep_call_outcomes_and_gain_the_episode() -> None:
    from ingestion.claude_rollouts import join_state
    from ingestion.rollout_format import FinalRecord, RolloutHeader
    from ingestion.schema import Action, TraceState

    header = RolloutHeader(rollout_id="toy-1.r", run_id="r", instance_id="toy-1", image="i",
                           student_model="s", student_url=None, max_turns=5, agent_version=1, tools=[],
                           created_at="now")
    calls = [{"id": "t", "name": "Bash", "kind": "error", "error": "Exit code 1", "exit_code": 1}]
    state = TraceState(state_id="claude_code:sess:0", trace_id="sess", turn=0, source="claude_code",
                       messages=[], tools=[], student_action=Action(), student_model=None,
                       metadata={"outcome": {"kind": "error", "calls": calls}})
    joined = join_state(state, header, FinalRecord(exit_status="submitted", turns=1, reward=1.0), None)
    assert joined.metadata["outcome"] == {"kind": "error", "calls": calls, "reward": 1.0,
                                          "exit_status": "submitted"}
