"""Other agents' logs (issue #26): Codex CLI and Gemini CLI sessions read by content, one state per
assistant turn that acts, the invariants every state keeps, and the pitfalls of real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ingestion.detect import sniff
from ingestion.options import IngestOptions
from ingestion.sources import find_files, iter_states
from ingestion.stats import IngestStats

DATA = Path(__file__).parent / "data" / "agents"
GEMINI_MADE = "3fceaf6a-0a63-469e-91a5-215bc3c48462"
CODEX, GEMINI = DATA / "codex", DATA / "gemini"
# What must never reach a state: reasoning summaries, encrypted reasoning, Gemini's thoughts.
REASONING = ["SYNTHETIC_ENCRYPTED_CONTENT_MUST_NOT_RENDER", "I will inspect the synthetic directory",
             "Planning API endpoint structure", "Planning authentication middleware", "Planning to create",
             "may require elevated permissions", "User wants to change port configuration",
             "Need to read file to find actual host value", "[REDACTED_THOUGHT]", "Generating Specific"]

# Counted by hand from the files: the assistant responses that say or call something.
CODEX_TURNS = {
    "11111111-1111-4111-8111-111111111111": 4,   # exec_command, apply_patch, mcp lookup, the answer
    "22222222-2222-4222-8222-222222222222": 1,   # spawn_agent
    "44444444-4444-4444-8444-444444444444": 1,   # the pre-envelope layout: one answer
    "rejection-codex-001": 7,                    # 4 calls (one aborted) and 3 answers
    "019e9625-802f-7e91-840a-cfe88d14117a": 1,   # a real `codex exec` run (0.135.0): one answer
    "compact-codex-001": 6,                      # 4 before the compaction, 2 after
    "01a21155-d938-74a0-8ae2-5b8c273272e1": 6,   # the real CLI (examples/make_codex_sessions.py): 5 calls
}                                                # 55555555…: a prompt and no response, no state
GEMINI_TURNS = {"rejection-gemini-001": 5, "dcbe78d3-ea75-4786-929e-d6cff0fc00ed": 1,
                f"{GEMINI_MADE}": 6}   # the real CLI (examples/make_gemini_sessions.py): 5 calls, an answer


def read(*sources: Path, **options: Any) -> tuple[list[Any], IngestStats]:
    stats = IngestStats()
    states = list(iter_states(list(sources), IngestOptions(**options), stats))
    return states, stats


def per_trace(states: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for state in states:
        counts[state.trace_id] = counts.get(state.trace_id, 0) + 1
    return counts


def check_invariants(state: Any) -> None:
    """System prompt first; every tool message answers a call of the assistant message before it,
    every call is answered before the next user or assistant message; no reasoning anywhere."""
    messages = state.messages
    assert messages[0]["role"] == "system" and all(m["role"] != "system" for m in messages[1:])
    open_calls: set[str] = set()
    for message in messages[1:]:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, (state.state_id, message)
            open_calls.discard(message["tool_call_id"])
            assert message["name"]
            continue
        assert not open_calls, (state.state_id, "a call left unanswered", open_calls)
        open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    assert not open_calls
    text = json.dumps([state.messages, state.student_action.model_dump()])
    assert not [r for r in REASONING if r in text]
    assert state.student_action.thinking is None


def test_codex_states_match_the_hand_count_and_keep_the_invariants() -> None:
    states, stats = read(CODEX)
    assert per_trace(states) == CODEX_TURNS
    assert {s.source for s in states} == {"codex"}
    for state in states:
        check_invariants(state)
    assert stats.formats == {"codex": {"files": 8, "states": sum(CODEX_TURNS.values())}}
    assert not stats.skipped_files and stats.skipped_traces == {"no_turns": 1}
    # The agent's own tools, so teachers answer in its vocabulary; the system prompt names the agent.
    first = next(s for s in states if s.trace_id.startswith("1111"))
    names = [t["function"]["name"] for t in first.tools]
    assert names[:3] == ["apply_patch", "update_plan", "view_image"] and "exec_command" in names
    assert "shell" not in names   # unified exec replaced it in this build
    assert first.messages[0]["content"].startswith("You are Codex CLI,")
    assert "Claude" not in first.messages[0]["content"]


def test_codex_models_per_turn_outcomes_and_compaction() -> None:
    states, _ = read(CODEX)
    by_id = {s.state_id: s for s in states}
    assert by_id["codex:019e9625-802f-7e91-840a-cfe88d14117a:0"].student_model == "gpt-5.5"
    assert by_id["codex:44444444-4444-4444-8444-444444444444:0"].student_model is None
    # The real CLI's run: exit codes from its JSON output; the failing test run is recovered next turn.
    made = [by_id[f"codex:01a21155-d938-74a0-8ae2-5b8c273272e1:{n}"] for n in range(6)]
    assert [s.metadata["outcome"]["kind"] for s in made] == ["ok", "ok", "ok", "error", "ok", "ok"]
    assert made[3].metadata["outcome"]["calls"][0]["exit_code"] == 1
    assert made[3].metadata["recovery"] == made[4].state_id
    assert made[2].student_action.tool_calls[0].arguments["command"][0] == "apply_patch"
    patch = by_id["codex:11111111-1111-4111-8111-111111111111:1"].student_action.tool_calls[0]
    assert (patch.name, patch.arguments["input"].splitlines()[0]) == ("apply_patch", "*** Begin Patch")
    # The aborted turn's call is interrupted; the call the user talked over has no result.
    aborted = by_id["codex:rejection-codex-001:6"].metadata["outcome"]
    assert aborted["kind"] == "interrupted" and aborted["calls"][0]["id"] == "call_esc_004"
    assert by_id["codex:rejection-codex-001:2"].metadata["outcome"]["kind"] == "no_result"
    # After the compaction the history is what Codex sent: the user's messages and the summary.
    after = by_id["codex:compact-codex-001:4"].messages
    assert [m["role"] for m in after] == ["system", "user"]
    assert "Outstanding TODOs" in after[1]["content"] and "Add the user CRUD endpoints" in after[1]["content"]
    assert "I see you have a Flask Blueprint" not in json.dumps(after)


def test_gemini_states_match_the_hand_count_outcomes_and_invariants() -> None:
    states, stats = read(GEMINI)
    assert per_trace(states) == GEMINI_TURNS
    for state in states:
        check_invariants(state)
    assert stats.formats == {"gemini": {"files": 3, "states": 12}}
    by_id = {s.state_id: s for s in states}
    failed = by_id["gemini:rejection-gemini-001:1"]
    assert failed.metadata["outcome"]["kind"] == "error"
    assert "0 occurrences" in failed.metadata["outcome"]["calls"][0]["error"]
    assert failed.metadata["recovery"] == "gemini:rejection-gemini-001:2"
    assert failed.student_model == "gemini-2.5-pro"
    # The embedded result answers the call in the next state's history.
    tool = [m for m in by_id["gemini:rejection-gemini-001:2"].messages if m["role"] == "tool"]
    assert [m["content"][:15] for m in tool] == ["Edit successful", "Failed to edit,"]
    assert by_id["gemini:dcbe78d3-ea75-4786-929e-d6cff0fc00ed:0"].messages[0]["content"].startswith(
        "You are Gemini CLI,")
    # The real CLI's recording: each model message written twice (the second with its calls), the
    # results both embedded in the calls and echoed as functionResponse parts (kept once), and the
    # shell's exit code read from its output.
    made = [by_id[f"gemini:{GEMINI_MADE}:{n}"] for n in range(6)]
    assert [s.metadata["outcome"]["kind"] for s in made] == ["ok", "ok", "error", "ok", "ok", "ok"]
    assert made[2].metadata["outcome"]["calls"][0]["exit_code"] == 1
    assert made[2].metadata["recovery"] == made[3].state_id
    assert [c.name for s in made for c in s.student_action.tool_calls] == [
        "list_directory", "read_file", "run_shell_command", "replace", "run_shell_command"]
    assert "The test fails: fix calc.py." in made[0].messages[1]["content"]
    assert stats.history["gemini_result_echo"] == 5


def codex_line(kind: str, payload: dict[str, Any], ts: str = "2026-01-01T00:00:00Z") -> str:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload}, ensure_ascii=False)


def codex_session(session: str, prompt: str, calls: int, model: str = "gpt-5-codex") -> list[str]:
    lines = [codex_line("session_meta", {"id": session, "cwd": "/repo", "cli_version": "0.50.0"}),
             codex_line("turn_context", {"model": model, "cwd": "/repo"}),
             codex_line("response_item", {"type": "message", "role": "user",
                                          "content": [{"type": "input_text", "text": prompt}]})]
    for n in range(calls):
        call = f"{session}-call-{n}"
        lines += [codex_line("response_item", {"type": "reasoning", "summary": [],
                                               "encrypted_content": "gAAAA-secret-reasoning"}),
                  codex_line("response_item", {"type": "function_call", "name": "shell", "call_id": call,
                                               "arguments": json.dumps({"command": ["bash", "-lc", "ls"]})}),
                  codex_line("response_item", {"type": "function_call_output", "call_id": call,
                                               "output": json.dumps({"output": "boom",
                                                                     "metadata": {"exit_code": n % 2}})})]
    return lines


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(("\n".join(lines) + "\n").encode())
    return path


def test_pitfalls_nel_prefix_copy_fork_and_exit_codes(tmp_path: Path) -> None:
    # A raw U+0085 (NEL) inside a JSON string: lines split on \n alone, never str.splitlines().
    nel = write(tmp_path / "a" / "rollout-nel.jsonl", codex_session("nel", "look\x85here", 2))
    assert "\x85" in nel.read_text(encoding="utf-8")
    # A byte-exact prefix of another file (a session copied mid-write) and a fork that starts with a
    # second session_meta and copies its parent's lines.
    full = codex_session("parent", "fix it", 3)
    write(tmp_path / "a" / "rollout-full.jsonl", full)
    write(tmp_path / "b" / "rollout-prefix.jsonl", full[:9])   # two of its three calls
    fork = [codex_line("session_meta", {"id": "fork", "cwd": "/repo", "forked_from_id": "parent"}), *full,
            *codex_session("fork", "now the docs", 1)[1:]]
    write(tmp_path / "b" / "rollout-fork.jsonl", fork)
    states, stats = read(tmp_path / "a", tmp_path / "b")
    assert per_trace(states) == {"nel": 2, "parent": 3, "fork": 1}
    assert len({s.state_id for s in states}) == len(states)
    assert stats.skipped_turns["duplicate_message_id"] == 2 + 3   # the prefix's and the fork's copies
    assert stats.history["codex_extra_session_meta"] == 1
    nel_state = next(s for s in states if s.trace_id == "nel")
    assert nel_state.messages[1]["content"] == "look\x85here"
    assert "gAAAA" not in json.dumps([s.model_dump() for s in states])
    # Exit codes from the older JSON output: 1 is an error, whose next turn is its recovery.
    kinds = [s.metadata["outcome"]["kind"] for s in states if s.trace_id == "parent"]
    assert kinds == ["ok", "error", "ok"]
    failed = next(s for s in states if s.state_id == "codex:parent:1")
    assert failed.metadata["outcome"]["calls"][0]["exit_code"] == 1
    assert failed.metadata["recovery"] == "codex:parent:2"


def gemini_jsonl(tmp_path: Path) -> Path:
    header = {"sessionId": "g-1", "projectHash": "h", "startTime": "2026-01-01T00:00:00Z", "kind": "main"}
    user = {"id": "u1", "timestamp": "t", "type": "user", "content": [{"text": "list files"}]}
    first = {"id": "m1", "timestamp": "t", "type": "gemini", "content": "", "model": "gemini-2.5-pro",
             "thoughts": [{"subject": "s", "description": "secret thought"}]}
    call = {"id": "c1", "name": "list_directory", "args": {"dir_path": "."}, "status": "success",
            "result": [{"functionResponse": {"id": "c1", "name": "list_directory",
                                             "response": {"output": "a.py"}}}]}
    again = {**first, "toolCalls": [call]}   # the same id written twice: the second adds the call
    answer = {"id": "m2", "timestamp": "t", "type": "gemini", "content": "a.py", "model": "gemini-2.5-pro"}
    retry = {"id": "u2", "timestamp": "t", "type": "user", "content": "again"}
    info = {"id": "i1", "timestamp": "t", "type": "info", "content": "Loaded cached credentials."}
    answer2 = {**answer, "id": "m3", "content": "a.py again"}
    lines = [header, user, first, {"$set": {"lastUpdated": "t"}}, again, answer, {"$rewindTo": "m2"}, info,
             retry, answer2]
    return write(tmp_path / "chats" / "session-2026-01-01T00-00-g1.jsonl", [json.dumps(x) for x in lines])


def test_gemini_upsert_log_same_id_twice_and_rewind(tmp_path: Path) -> None:
    states, stats = read(gemini_jsonl(tmp_path))
    assert [s.state_id for s in states] == ["gemini:g-1:0", "gemini:g-1:1", "gemini:g-1:2"]
    for state in states:
        check_invariants(state)
    assert [c.name for c in states[0].student_action.tool_calls] == ["list_directory"]
    assert states[0].metadata["outcome"]["kind"] == "ok"
    # After the rewind to m2, the history is the context before m2 (m2 itself dropped), then `again`.
    assert [m["role"] for m in states[2].messages] == ["system", "user", "assistant", "tool", "user"]
    assert "a.py" == states[2].messages[3]["content"] and states[2].messages[4]["content"] == "again"
    assert "secret thought" not in json.dumps([s.model_dump() for s in states])
    assert stats.skipped_records["gemini.info"] == 1


def test_mixed_folder_every_file_read_or_skipped_with_a_reason(fixtures_root: Path, tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    shutil.copytree(CODEX, mixed / "codex")
    shutil.copytree(GEMINI, mixed / "gemini")
    session = next(fixtures_root.rglob("fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"))
    shutil.copy(session, mixed / "claude.jsonl")
    (mixed / "empty.jsonl").write_bytes(b"")
    (mixed / "notes.json").write_text('{"hello": "world"}')
    (mixed / "logs.json").write_text('[{"sessionId": "s", "message": "hi"}]')       # Gemini's logs.json
    (mixed / "other.jsonl").write_text('{"event": "x"}\n{"event": "y"}\n')
    (mixed / "binary.jsonl").write_bytes(b"\x00\xff\xfe garbage\n")
    (mixed / "copilot" / "s1").mkdir(parents=True)
    copilot_events(mixed / "copilot" / "s1" / "events.jsonl")
    files = find_files(mixed)
    states, stats = read(mixed)
    assert stats.files == len(files) == 8 + 3 + 1 + 6
    # Every file is read as one format or skipped with its reason before reading; the garbage named
    # like a session goes to the Claude Code reader (as before formats were sniffed), which finds nothing.
    read_files = sum(v["files"] for v in stats.formats.values())
    assert stats.skipped_files == {"empty_file": 1, "unknown_format": 3, "no_conversation": 1}
    assert read_files + 1 + 3 == stats.files
    assert set(stats.formats) == {"claude_code", "codex", "gemini", "copilot"}
    assert stats.formats["claude_code"]["files"] == 2
    assert {s.source for s in states} == {"claude_code", "codex", "gemini", "copilot"}
    assert sum(v["states"] for v in stats.formats.values()) == len(states) == stats.states


@pytest.mark.parametrize(("head", "expected"), [
    ('{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}', "codex"),
    ('{"id":"x","timestamp":"t","instructions":null}\n{"record_type":"state"}', "codex"),
    ('{"sessionId":"s","projectHash":"h","startTime":"t"}', "gemini"),
    ('{"id":"m","type":"user","content":"hi"}', "gemini"),
    ('{"type":"summary","summary":"x","leafUuid":"u"}', "claude_code"),
    ('{"type":"queue-operation","operation":"enqueue","sessionId":"s"}', "claude_code"),
    ('{"type":"assistant.message","data":{"content":"x"},"id":"e"}', "copilot"),
    ('{"whatever":1}', "unknown"),
])
def test_sniff_by_content_not_name(tmp_path: Path, head: str, expected: str) -> None:
    path = tmp_path / "any-name.jsonl"   # the same name for every format: only the content decides
    path.write_text(head + "\n")
    assert sniff(path) == expected


def test_pretty_printed_gemini_json_is_sniffed(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    path.write_text(json.dumps({"sessionId": "s", "projectHash": "h", "messages": []}, indent=2))
    assert sniff(path) == "gemini"


def copilot_events(path: Path) -> Path:
    """A Copilot CLI events.jsonl: a model change, a call that fails, its retry, a sub-agent's message
    and streaming deltas that are not the conversation, reasoning that must not be kept."""
    def event(kind: str, data: dict[str, Any], **extra: Any) -> str:
        return json.dumps({"type": kind, "data": data, "id": f"e-{kind}-{len(lines)}",
                           "timestamp": "2026-04-08T15:04:05Z", **extra})
    lines: list[str] = []
    for kind, data, extra in [
        ("session.start", {"sessionId": "cp-1", "copilotVersion": "0.0.340", "selectedModel": "gpt-5",
                           "context": {"cwd": "/repo", "branch": "main"}}, {}),
        ("user.message", {"content": "run the tests"}, {}),
        ("session.model_change", {"newModel": "claude-sonnet-4.5"}, {}),
        ("assistant.message_delta", {"deltaContent": "Run"}, {"ephemeral": True}),
        ("assistant.message", {"messageId": "m1", "content": "Running them.", "reasoningText": "secret plan",
                               "toolRequests": [{"toolCallId": "t1", "name": "bash", "type": "function",
                                                 "arguments": {"command": "pytest -q", "description": "x"}}]},
         {}),
        ("tool.execution_start", {"toolCallId": "t1", "toolName": "bash"}, {}),
        ("tool.execution_complete", {"toolCallId": "t1", "success": False,
                                     "error": {"message": "exit 1: 2 failed"}}, {}),
        ("assistant.message", {"messageId": "sub", "content": "sub-agent work"}, {"agentId": "child"}),
        ("assistant.message", {"messageId": "m2", "content": "", "toolRequests": [
            {"toolCallId": "t2", "name": "view", "arguments": json.dumps({"path": "/repo/a.py"})}]}, {}),
        ("tool.execution_complete", {"toolCallId": "t2", "success": True,
                                     "result": {"content": "print(1)"}}, {}),
        ("assistant.message", {"messageId": "m3", "content": "The test imports a.py; fixed."}, {}),
    ]:
        lines.append(event(kind, data, **extra))
    return write(path, lines)


def test_copilot_events_states_outcomes_and_invariants(tmp_path: Path) -> None:
    states, stats = read(copilot_events(tmp_path / "session-state" / "cp-1" / "events.jsonl"))
    assert [s.state_id for s in states] == ["copilot:cp-1:0", "copilot:cp-1:1", "copilot:cp-1:2"]
    for state in states:
        check_invariants(state)
    assert [s.student_model for s in states] == ["claude-sonnet-4.5"] * 3
    assert [s.metadata["outcome"]["kind"] for s in states] == ["error", "ok", "ok"]
    assert states[0].metadata["recovery"] == "copilot:cp-1:1"
    assert states[1].student_action.tool_calls[0].arguments == {"path": "/repo/a.py"}
    assert states[0].messages[0]["content"].startswith("You are GitHub Copilot CLI,")
    text = json.dumps([s.model_dump() for s in states])
    assert "secret plan" not in text and "sub-agent work" not in text
    assert stats.skipped_records["copilot.subagent"] == 1
    assert stats.formats == {"copilot": {"files": 1, "states": 3}}


def test_codex_replacement_history_and_subagent_threads(tmp_path: Path) -> None:
    replaced = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
                {"type": "reasoning", "summary": [{"text": "brief"}], "encrypted_content": "gAAAA-kept-out"},
                {"type": "function_call", "name": "shell", "call_id": "old-1",
                 "arguments": json.dumps({"command": ["bash", "-lc", "ls"]})},
                {"type": "function_call_output", "call_id": "old-1", "output": "a.py"},
                {"type": "compaction", "encrypted_content": "gAAAA-summary"},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "SUMMARY"}]}]
    lines = codex_session("cmp", "fix it", 2)
    lines.append(codex_line("compacted", {"message": "", "replacement_history": replaced}))
    lines += [line.replace("cmp-call-0", "cmp-call-9") for line in codex_session("cmp", "go on", 1)[2:]]
    write(tmp_path / "s" / "rollout-cmp.jsonl", lines)
    sub = codex_session("sub", "review", 1)
    sub[0] = codex_line("session_meta", {"id": "sub", "cwd": "/repo", "source": {"subagent": "review"}})
    write(tmp_path / "s" / "rollout-sub.jsonl", sub)
    states, stats = read(tmp_path / "s")
    assert per_trace(states) == {"cmp": 3} and stats.skipped_traces["subagent"] == 1
    after = states[2].messages
    assert [m["role"] for m in after] == ["system", "user", "assistant", "tool", "user"]
    assert after[3]["tool_call_id"] == "old-1" and "SUMMARY" in after[4]["content"]
    assert "go on" in after[4]["content"]
    assert "gAAAA" not in json.dumps([s.model_dump() for s in states])
    with_subagents, _ = read(tmp_path / "s", include_subagents=True)
    assert per_trace(with_subagents) == {"cmp": 3, "sub": 1}


def test_every_cut_and_corruption_of_the_fixtures_reads_without_error(tmp_path: Path) -> None:
    """Live sessions are read while being written: every file cut at any of a spread of bytes, or with
    a line of garbage, a non-object line or invalid UTF-8 in the middle, is read or skipped, never an
    exception; a cut file gives no more states than the whole one."""
    sources = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json"))
    for n, source in enumerate(sources):
        data = source.read_bytes()
        lines = data.split(b"\n")
        middle = len(lines) // 2
        variants = [data[:cut] for cut in range(0, len(data), max(len(data) // 12, 1))]
        variants += [b"\n".join([*lines[:middle], junk, *lines[middle:]])
                     for junk in (b"{not json", b"[1, 2]", b'{"type": "response_item"}', b"\xff\xfe\x00",
                                  b'{"id": 5, "type": "gemini", "toolCalls": "x"}',
                                  b'{"type": "assistant.message", "data": {"toolRequests": [1]}}',
                                  b'{"type": "response_item", "payload": {"type": "function_call", '
                                  b'"arguments": 5}}',
                                  b'{"type": "session_meta", "payload": {"git": "x", "id": 7}}',
                                  b'{"type": "compacted", "payload": {"replacement_history": [1, "x"]}}',
                                  b'{"$set": {"messages": "x"}}', b'{"$rewindTo": 5}',
                                  b'{"type": "tool.execution_complete", "data": {"result": 3, "error": 4}}')]
        whole = len(read(source)[0])
        for m, variant in enumerate(variants):
            path = tmp_path / f"{n}-{m}" / source.name
            path.parent.mkdir()
            path.write_bytes(variant)
            states, _ = read(path)
            if m < len(variants) - 12:
                assert len(states) <= whole, (source, m)


def test_a_copied_and_diverging_session_keeps_state_ids_unique(tmp_path: Path) -> None:
    """#24 item 3 for every format: a Codex session copied with other turns (same session id) takes a
    distinct, stable trace id instead of repeating the first file's state ids."""
    original = sorted((DATA / "codex" / "made").rglob("*.jsonl"))[0]
    text = original.read_text()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / original.name).write_text(text)
    # the copy's calls were made again (new call ids): other turns under the same session id
    (tmp_path / "b" / original.name).write_text(text.replace('"call_', '"call_again_'))

    def ids() -> tuple[list[str], int]:
        stats = IngestStats()
        return [s.state_id for s in iter_states(tmp_path, IngestOptions(), stats)], stats.trace_id_collisions

    first, collisions = ids()
    assert len(first) == len(set(first)) and collisions == 1
    alone = [s.state_id for s in iter_states(tmp_path / "a", IngestOptions(), IngestStats())]
    assert set(alone) < set(first)         # the first file keeps its ids; the copy's new turns are added
    assert ids() == (first, 1)                                  # the same ids on every run
