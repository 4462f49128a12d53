"""Session shapes newer CLIs write: blocking Stop hooks, signature-only thinking, nested subagents with
`.meta.json`, fork subagents that start with a copy of the parent's conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from tests.sessions import (
    SESSION,
    assistant,
    attachment,
    basic_session,
    system,
    text,
    thinking,
    tool_result,
    tool_use,
    user,
    write_session,
)

HOOK = "[~/.claude/hooks/check.sh]: 2 tests fail, fix them before stopping"
FEEDBACK = f"Stop hook feedback:\n{HOOK}"


def ingest(source: Path, **options: Any) -> tuple[list, IngestStats]:
    stats = IngestStats()
    return list(iter_states(source, IngestOptions(**options), stats)), stats


def roles(state: Any) -> list[str]:
    return [m["role"] for m in state.messages] + ["assistant"]   # the action closes the prompt


def assistant_twice(state: Any) -> bool:
    seq = roles(state)
    return any(a == b == "assistant" for a, b in zip(seq, seq[1:], strict=False))


# --- blocking Stop hooks --------------------------------------------------------------------------

def blocked(between: list[dict]) -> list[dict]:
    """The model stops ("Done."), a Stop hook blocks, the model goes on: `between` lies between."""
    parent = between[-1]["uuid"] if between else "a1"
    return [user("u1", None, "fix the bug"), assistant("a1", "u1", "msg_1", text("Done.")), *between,
            assistant("a2", parent, "msg_2", tool_use("toolu_1", "pytest")),
            user("r2", "a2", tool_result("toolu_1", "2 passed")),
            assistant("a3", "r2", "msg_3", text("Fixed, tests pass."))]


def summary(parent: str, errors: list[str]) -> dict:
    return system("s1", parent, "stop_hook_summary", hookCount=1, hookInfos=[{"command": "check.sh"}],
                  hookErrors=errors, preventedContinuation=False, stopReason="", hasOutput=True,
                  level="suggestion", toolUseID="hook-1")


def blocking_error(uuid: str, parent: str) -> dict:
    return attachment(uuid, parent, {"type": "hook_blocking_error", "hookName": "Stop", "hookEvent": "Stop",
                                     "toolUseID": "hook-1",
                                     "blockingError": {"blockingError": HOOK, "command": "check.sh"}})


CASES = {
    # CLI 2.0.x–2.1.x: only the summary records what the hook said
    "summary": ([summary("a1", [HOOK])], FEEDBACK, 1),
    # 2.1.9x+: the hook's attachment, then the summary
    "attachment and summary": ([blocking_error("h1", "a1"), summary("h1", [HOOK])], FEEDBACK, 1),
    "attachment alone": ([blocking_error("h1", "a1")], FEEDBACK, 1),
    # versions that wrote the feedback down: it is there once, not twice
    "recorded feedback": ([blocking_error("h1", "a1"),
                           user("f1", "h1", FEEDBACK, isMeta=True), summary("f1", [HOOK])], FEEDBACK, 0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_stop_hook_feedback_is_the_user_turn_the_model_saw(tmp_path: Path, case: str) -> None:
    between, last, added = CASES[case]
    states, stats = ingest(write_session(tmp_path, blocked(between)))
    assert [s.student_action.content or s.student_action.tool_calls[0].name for s in states] == [
        "Done.", "Bash", "Fixed, tests pass."]
    after_hook = states[1]
    assert [m["role"] for m in after_hook.messages] == ["system", "user", "assistant", "user"]
    assert after_hook.messages[-1]["content"] == last
    assert [m["content"] for m in states[2].messages].count(last) == 1
    assert not any(assistant_twice(s) for s in states)
    assert stats.history["hook_feedback"] == added


def test_two_hooks_give_one_user_turn(tmp_path: Path) -> None:
    other = "[lint.sh]: 3 lint errors"
    states, _ = ingest(write_session(tmp_path, blocked([summary("a1", [HOOK, other])])))
    assert states[1].messages[-1] == {"role": "user", "content": f"{FEEDBACK}\nStop hook feedback:\n{other}"}


def test_without_a_user_turn_two_assistant_messages_stay(tmp_path: Path) -> None:
    # A hook that ran and blocked nothing: the session truly has no user turn between.
    states, stats = ingest(write_session(tmp_path, blocked([summary("a1", [])])))
    assert states[1].messages[-1] == {"role": "assistant", "content": "Done."}
    assert stats.history["hook_feedback"] == 0


# --- thinking -------------------------------------------------------------------------------------

@pytest.mark.parametrize("thought, kept", [("", None), ("  \n", None), ("Check the tests first.",
                                                                        "Check the tests first.")])
def test_empty_thinking_is_never_emitted(tmp_path: Path, thought: str, kept: str | None) -> None:
    records = [user("u1", None, "go"), assistant("a1", "u1", "msg_1", thinking(thought)),
               assistant("a2", "a1", "msg_1", text("On it.")), user("u2", "a2", "more"),
               assistant("a3", "u2", "msg_2", text("Done."))]
    states, _ = ingest(write_session(tmp_path, records))
    assert states[0].student_action.thinking == kept
    dumped = json.dumps([s.model_dump(mode="json") for s in states])
    assert '"thinking": ""' not in dumped and "EqQBCkYIBxgCKkB" not in dumped   # nor any signature


# --- nested subagents and .meta.json --------------------------------------------------------------

def sidechain(records: list[dict], agent: str) -> list[dict]:
    return [{**r, "isSidechain": True, "agentId": agent,
             **({"message": {**r["message"], "id": r["message"]["id"] + "_" + agent}}
                if r["type"] == "assistant" else {})} for r in records]


def nested_project(root: Path, meta: bytes | None) -> Path:
    project = root / "-repo"
    write_session(project, basic_session())
    workflow = project / SESSION / "subagents" / "workflows" / "wf-1"
    write_session(workflow, sidechain(basic_session(), "a1b2c3"), name="agent-a1b2c3")
    if meta is not None:
        (workflow / "agent-a1b2c3.meta.json").write_bytes(meta)
    write_session(workflow, [{"type": "step", "name": "lint", "status": "done"}], name="journal")
    return project


def test_nested_workflow_subagents_and_their_meta(tmp_path: Path) -> None:
    meta = {"agentType": "code-reviewer", "description": "review", "toolUseId": "toolu_9",
            "parentAgentId": "a0f1", "spawnDepth": 2}
    project = nested_project(tmp_path, json.dumps(meta).encode())
    states, stats = ingest(project, include_subagents=True)
    agent = [s for s in states if s.trace_id == f"{SESSION}/agent-a1b2c3"]
    assert [s.state_id for s in agent] == [f"claude_code:{SESSION}/agent-a1b2c3:{i}" for i in range(2)]
    assert {k: agent[0].metadata[k] for k in ("agent_id", "agent_type", "spawn_depth", "parent_agent_id",
                                              "tool_use_id")} == {
        "agent_id": "a1b2c3", "agent_type": "code-reviewer", "spawn_depth": 2, "parent_agent_id": "a0f1",
        "tool_use_id": "toolu_9"}
    assert stats.skipped_files == {"not_a_transcript": 1}   # the workflow's journal.jsonl
    default, skipped = ingest(project)
    assert len(default) == 2 and skipped.skipped_traces["subagent"] == 1


def test_a_broken_meta_file_is_counted_and_the_agent_still_read(tmp_path: Path) -> None:
    states, stats = ingest(nested_project(tmp_path, b"{not json"), include_subagents=True)
    assert len([s for s in states if "/agent-" in s.trace_id]) == 2
    assert stats.skipped_files["bad_meta_json"] == 1


# --- fork subagents -------------------------------------------------------------------------------

def fork_project(root: Path) -> tuple[Path, Path]:
    """A parent that forks at its second turn, and the fork's transcript: the parent's conversation
    copied (same uuids and message ids), the Agent call cloned, the placeholder + directive, its work."""
    parent = [user("u1", None, "plan the release"), assistant("a1", "u1", "msg_1", text("Plan: A, then B.")),
              user("u2", "a1", "fork a check of B"),
              assistant("a2", "u2", "msg_2", {"type": "tool_use", "id": "toolu_f", "name": "Agent",
                                              "input": {"prompt": "check B"}}),
              user("r2", "a2", tool_result("toolu_f", "B is fine")),
              assistant("a3", "r2", "msg_3", text("Released."))]
    project = root / "-repo"
    main = write_session(project, parent)
    copied = [{**r, "isSidechain": True, "agentId": "afork1"} for r in parent[:4]]
    copied[3] = {**copied[3], "uuid": "a2-clone"}
    start = user("d1", "a2-clone", [
        {"type": "tool_result", "tool_use_id": "toolu_f",
         "content": [{"type": "text", "text": "Fork started — processing in background"}]},
        {"type": "text", "text": "<fork-boilerplate>\nYou are a forked worker.\n</fork-boilerplate>\n\n"
                                 "Your directive: check B"}], isSidechain=True, agentId="afork1")
    own = [assistant("f1", "d1", "msg_f1", tool_use("toolu_b", "make check-b"), isSidechain=True,
                     agentId="afork1"),
           user("fr1", "f1", tool_result("toolu_b", "ok"), isSidechain=True, agentId="afork1"),
           assistant("f2", "fr1", "msg_f2", text("B is fine."), isSidechain=True, agentId="afork1")]
    subagents = project / SESSION / "subagents"
    fork = write_session(subagents, [*copied, start, *own], name="agent-afork1")
    (subagents / "agent-afork1.meta.json").write_text(json.dumps({"agentType": "fork", "spawnDepth": 1}))
    return main, fork


def test_a_fork_gives_states_for_its_own_turns_only(tmp_path: Path) -> None:
    main, fork = fork_project(tmp_path)
    alone, stats = ingest(fork, include_subagents=True)
    both, both_stats = ingest(main.parent, include_subagents=True)
    trace = f"{SESSION}/agent-afork1"
    assert [s.state_id for s in alone] == [f"claude_code:{trace}:0", f"claude_code:{trace}:1"]
    assert [s.state_id for s in both] == [f"claude_code:{SESSION}:{i}" for i in range(3)] + \
        [s.state_id for s in alone]
    assert len({s.student_action.model_dump_json() for s in both}) == len(both)   # no turn twice
    assert stats.skipped_turns["fork_inherited"] == both_stats.skipped_turns["fork_inherited"] == 2
    assert not both_stats.skipped_turns["duplicate_message_id"]
    first = alone[0]
    assert first.metadata["agent_type"] == "fork"
    # The fork saw the parent's conversation: it stays the history of the fork's own turns.
    assert [m.get("content") for m in first.messages[1:]] == [
        "plan the release", "Plan: A, then B.", "fork a check of B", "",
        "Fork started — processing in background",
        "<fork-boilerplate>\nYou are a forked worker.\n</fork-boilerplate>\n\nYour directive: check B"]


def test_a_subagent_without_session_ids_belongs_to_its_session_folder(tmp_path: Path) -> None:
    records = [{k: v for k, v in r.items() if k != "sessionId"} for r in sidechain(basic_session(), "a77")]
    agent = write_session(tmp_path / "-repo" / SESSION / "subagents", records, name="agent-a77")
    states, _ = ingest(agent, include_subagents=True)
    assert [s.trace_id for s in states] == [f"{SESSION}/agent-a77"] * 2


def test_no_fixture_state_has_two_assistant_messages_in_a_row(fixtures_root: Path) -> None:
    states, _ = ingest(fixtures_root, include_subagents=True)
    assert len(states) > 300 and not [s.state_id for s in states if assistant_twice(s)]


@pytest.mark.parametrize("kept", ["preservedMessages", "preservedSegment"])
def test_after_a_compaction_the_kept_messages_follow_the_summary(tmp_path: Path, kept: str) -> None:
    # CLI 2.1.3xx keeps the most recent messages verbatim after the summary and names them in the
    # boundary's compactMetadata (a uuid list, or a head..tail segment of the parentUuid chain).
    names = {"preservedMessages": {"anchorUuid": "s1", "uuids": ["a2", "u3"]},
             "preservedSegment": {"anchorUuid": "s1", "headUuid": "a2", "tailUuid": "u3"}}
    records = [*basic_session()[:3],
               assistant("a2", "u2", "msg_2", tool_use("toolu_2", "cat a.py")),
               user("u3", "a2", tool_result("toolu_2", "print(1)")),
               system("b1", None, "compact_boundary", logicalParentUuid="u3",
                      compactMetadata={"trigger": "auto", "preTokens": 99000, kept: names[kept]}),
               user("s1", "b1", "This session is being continued from a previous conversation.",
                    isCompactSummary=True),
               assistant("a4", "s1", "msg_4", text("Done."))]
    states, _ = ingest(write_session(tmp_path, records))
    last = states[-1].messages[1:]
    assert [m["role"] for m in last] == ["user", "assistant", "tool"]
    assert last[0]["content"].startswith("This session") and last[1]["tool_calls"][0]["id"] == "toolu_2"
