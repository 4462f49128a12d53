"""History follows the parentUuid chain: edits, split responses, parallel tool calls, resumes."""

from __future__ import annotations

import json
from pathlib import Path

from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from tests.sessions import assistant, basic_session, text, tool_result, tool_use, user, write_session


def ingest(path: Path, **options) -> tuple[list, IngestStats]:
    stats = IngestStats()
    return list(iter_states(path, IngestOptions(**options), stats)), stats


def test_edited_prompt_drops_the_abandoned_branch(tmp_path: Path) -> None:
    records = [
        user("u0", None, "set up the project", "2025-11-17T11:00:00.000Z"),
        assistant("a0", "u0", "msg_0", text("Done."), "2025-11-17T11:00:01.000Z"),
        user("u1", "a0", "now delete everything", "2025-11-17T11:00:02.000Z"),          # abandoned
        assistant("a1", "u1", "msg_1", tool_use("toolu_rm", "rm -rf ."), "2025-11-17T11:00:03.000Z"),
        user("u1b", "a0", "now add a README", "2025-11-17T11:05:00.000Z"),              # the edit
        assistant("a2", "u1b", "msg_2", tool_use("toolu_w", "touch README.md"), "2025-11-17T11:05:01.000Z"),
        user("u3", "a2", tool_result("toolu_w", ""), "2025-11-17T11:05:02.000Z"),
        assistant("a3", "u3", "msg_3", text("Added README.md."), "2025-11-17T11:05:03.000Z"),
    ]
    states, _ = ingest(write_session(tmp_path, records))
    assert [s.turn for s in states] == [0, 1, 2, 3]
    last = states[-1]
    dumped = json.dumps(last.messages)
    assert "delete everything" not in dumped and "rm -rf" not in dumped
    assert [m["role"] for m in last.messages] == ["system", "user", "assistant", "user", "assistant", "tool"]
    abandoned = states[1]
    assert abandoned.student_action.tool_calls[0].arguments == {"command": "rm -rf ."}
    assert "add a README" not in json.dumps(abandoned.messages)


def test_split_response_is_one_turn_and_parallel_results_follow_it(tmp_path: Path) -> None:
    # One response, three lines: text, tool_use 1, then tool_use 2 logged after result 1.
    records = [
        user("u0", None, "check both"),
        assistant("a1", "u0", "msg_1", text("Checking.")),
        assistant("a2", "a1", "msg_1", tool_use("toolu_1", "ls a")),
        user("r1", "a2", tool_result("toolu_1", "A")),
        assistant("a3", "r1", "msg_1", tool_use("toolu_2", "ls b")),
        user("r2", "a3", tool_result("toolu_2", "B")),
        assistant("a4", "r2", "msg_2", text("Both exist.")),
    ]
    states, _ = ingest(write_session(tmp_path, records))
    assert len(states) == 2
    first = states[0].student_action
    assert first.content == "Checking." and [c.id for c in first.tool_calls] == ["toolu_1", "toolu_2"]
    roles = [(m["role"], m.get("tool_call_id")) for m in states[1].messages]
    assert roles == [("system", None), ("user", None), ("assistant", None), ("tool", "toolu_1"),
                     ("tool", "toolu_2")]


def test_result_on_a_side_branch_is_found(tmp_path: Path) -> None:
    # Result 2 hangs off result 1's sibling, so it is not on the next turn's parent chain.
    records = [
        user("u0", None, "go"),
        assistant("a1", "u0", "msg_1", tool_use("toolu_1", "ls a")),
        assistant("a2", "a1", "msg_1", tool_use("toolu_2", "ls b")),
        user("r1", "a2", tool_result("toolu_1", "A")),
        user("r2", "a2", tool_result("toolu_2", "B")),
        assistant("a3", "r1", "msg_2", text("ok")),
    ]
    states, stats = ingest(write_session(tmp_path, records))
    tool_ids = [m["tool_call_id"] for m in states[1].messages if m["role"] == "tool"]
    assert tool_ids == ["toolu_1", "toolu_2"]
    assert stats.budget["missing_tool_results"] == 0


def test_resumed_copy_gives_no_second_state(tmp_path: Path) -> None:
    write_session(tmp_path, basic_session(), name="aaaaaaaa-0000-0000-0000-000000000001")
    resumed = basic_session() + [
        user("u3", "a2", "and the tests?"),
        assistant("a3", "u3", "msg_3", text("None yet.")),
    ]
    write_session(tmp_path, resumed, name="bbbbbbbb-0000-0000-0000-000000000002")
    states, stats = ingest(tmp_path)
    assert [s.student_action.content or s.student_action.tool_calls[0].name for s in states] == [
        "Bash", "There are two files.", "None yet."]
    assert stats.skipped_turns["duplicate_message_id"] == 2
    assert states[-1].turn == 2  # numbered within its own trace, stable across runs


def test_context_budget_drops_oldest_turns_keeping_pairs(tmp_path: Path) -> None:
    records = [user("u0", None, "first task")]
    parent = "u0"
    for i in range(6):
        records += [assistant(f"a{i}", parent, f"msg_{i}", tool_use(f"toolu_{i}", f"cat f{i}")),
                    user(f"r{i}", f"a{i}", tool_result(f"toolu_{i}", "y" * 4000))]
        parent = f"r{i}"
    records.append(assistant("end", parent, "msg_end", text("done")))
    states, stats = ingest(write_session(tmp_path, records), max_prompt_tokens=3000)
    last = states[-1]
    assert last.messages[1]["content"] == "first task"
    assert last.messages[2]["role"] == "assistant"  # never a dangling tool message
    assert len(last.messages) < 2 + 12
    assert stats.budget["states_trimmed"] >= 1 and stats.budget["dropped_messages"] >= 2
