"""Trajectories of other agents (issue #26, trajectory half): mini-swe-agent, SWE-agent, OpenHands,
Harbor ATIF and trajectory datasets, read through the same detect → Conversation → states framework.
Each format's state count is checked against a count made here from the raw records."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from ingestion.detect import sniff
from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from tests.llm_server import LLMServer, Reply, chat_completion
from tests.teacher_script import COMMANDS, prompt_hash

DATA = Path(__file__).parent / "data" / "trajectories"
AGENTS = Path(__file__).parent / "data" / "agents"

# mini-swe-agent, as docs/usage/output_files.md shows it: text actions (`mini-swe-agent-1`) …
MINI_TEXT = {
    "info": {"mini_version": "1.17.0", "exit_status": "Submitted", "submission": "diff --git a/x b/x",
             "config": {"model": {"model_name": "anthropic/claude-sonnet-4-5-20250929"}}},
    "messages": [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
        {"role": "user", "content": "Please solve this issue: the test fails"},
        {"role": "assistant", "content": "THOUGHT: look first.\n\n```bash\nls -la\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\nsetup.py\n</output>"},
        {"role": "assistant", "content": "THOUGHT: run the tests.\n\n```bash\npytest -q\n```"},
        {"role": "user", "content": "<returncode>1</returncode>\n<output>\n1 failed\n</output>"},
        {"role": "assistant", "content": "I think I am done."},   # no block: a format error, still a turn
        {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks."},
        {"role": "assistant",
         "content": "THOUGHT: submit.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
        {"role": "user", "content": "", "extra": {"exit_status": "Submitted"}}],
    "trajectory_format": "mini-swe-agent-1"}
# … and tool calls (`mini-swe-agent-1.1`), with a model's reasoning kept beside the message.
MINI_TOOLS = {
    "info": {"mini_version": "2.0.0", "exit_status": "LimitsExceeded",
             "config": {"model": {"model_name": "openai/gpt-5"}}},
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix the bug"},
        {"role": "assistant", "content": "", "reasoning_content": "secret chain of thought",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "bash", "arguments": "{\"command\": \"cat a.py\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": "<returncode>0</returncode><output>x=1</output>", "extra": {"returncode": 0}},
        {"role": "assistant", "content": "Now edit.",
         "tool_calls": [{"id": "call_2", "type": "function",
                         "function": {"name": "bash",
                                      "arguments": "{\"command\": \"sed -i s/1/2/ a.py\"}"}}]},
        {"role": "tool", "tool_call_id": "call_2",
         "content": "<returncode>2</returncode><output>no</output>", "extra": {"returncode": 2}}],
    "trajectory_format": "mini-swe-agent-1.1"}


def _states(path: Path) -> tuple[list[Any], IngestStats]:
    stats = IngestStats()
    return list(iter_states(path, IngestOptions(), stats)), stats


def _check_invariants(states: list[Any]) -> None:
    for state in states:
        assert state.messages[0]["role"] == "system"
        assert all(m["role"] != "system" for m in state.messages[1:])
        open_calls: set[str] = set()
        for message in state.messages[1:]:
            if message["role"] == "tool":
                assert message["tool_call_id"] in open_calls
                open_calls.discard(message["tool_call_id"])
            else:
                assert not open_calls
                open_calls = {c["id"] for c in message.get("tool_calls") or ()}
            assert "reasoning_content" not in message and "secret chain" not in json.dumps(message)
        assert state.student_action.thinking is None
        names = {t["function"]["name"] for t in state.tools}
        assert {c.name for c in state.student_action.tool_calls} <= names


def _write(folder: Path, name: str, value: Any, indent: int | None = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(value, indent=indent))
    return path


def test_mini_swe_agent_text_and_tool_formats(tmp_path: Path) -> None:
    text = _write(tmp_path, "a.traj.json", MINI_TEXT)
    tools = _write(tmp_path, "b.traj.json", MINI_TOOLS, indent=None)
    assert sniff(text) == sniff(tools) == "mini_swe_agent"
    states, stats = _states(tmp_path)
    acting = sum(m["role"] == "assistant" for d in (MINI_TEXT, MINI_TOOLS) for m in d["messages"])
    assert len(states) == acting == 6
    _check_invariants(states)
    text_states = [s for s in states if s.student_model.startswith("anthropic")]
    first = text_states[0].student_action
    # A text action is the agent's text and one `bash` call holding the fenced block.
    assert first.content == "THOUGHT: look first." and first.tool_calls[0].name == "bash"
    assert first.tool_calls[0].arguments == {"command": "ls -la"}
    assert [t["function"]["name"] for t in text_states[0].tools] == ["bash"]
    outcomes = [s.metadata["outcome"] for s in text_states]
    assert [o["kind"] for o in outcomes] == ["ok", "error", "ok", "ok"]
    assert outcomes[1]["calls"][0]["exit_code"] == 1 and outcomes[0]["exit_status"] == "Submitted"
    assert text_states[1].metadata["recovery"] == text_states[2].state_id
    # The observation is the tool message answering the call, in the next state's history.
    assert text_states[1].messages[-1] == {"role": "tool", "tool_call_id": first.tool_calls[0].id,
                                           "name": "bash", "content": MINI_TEXT["messages"][3]["content"]}
    tool_states = [s for s in states if s.student_model == "openai/gpt-5"]
    assert [s.metadata["outcome"]["calls"][0]["exit_code"] for s in tool_states] == [0, 2]
    assert stats.history["reasoning_dropped"] == 1


def test_mini_swe_agent_made_by_the_real_tool() -> None:
    """examples/make_mini_swe_agent_trajectories.py: mini-swe-agent 2.4.6 itself, text and tool-call
    models; the loopback server numbers calls per response (`call_0` every turn), as some servers do."""
    made = DATA / "mini_swe_agent" / "made"
    for path in sorted(made.glob("*.traj.json")):
        raw = json.loads(path.read_text())
        acting = sum(m["role"] == "assistant" for m in raw["messages"])
        states, stats = _states(path)
        assert sniff(path) == "mini_swe_agent" and len(states) == acting == 6
        _check_invariants(states)
        assert {s.student_model for s in states} == {"openai/gpt-4o-mini"}
        assert [c.name for s in states for c in s.student_action.tool_calls] == ["bash"] * 6
        assert states[0].student_action.tool_calls[0].arguments == {"command": "ls"}
        assert "```" not in states[0].student_action.content
        outcomes = [s.metadata["outcome"] for s in states]
        assert [o["calls"][0]["exit_code"] for o in outcomes] == [0, 0, 1, 0, 0, None]
        assert [o["kind"] for o in outcomes] == ["ok", "ok", "error", "ok", "ok", "no_result"]
        assert states[2].metadata["recovery"] == states[3].state_id
        assert outcomes[0]["exit_status"] == "Submitted"
        assert stats.skipped_records["trajectory.role.exit"] == 1


def test_swe_agent_traj() -> None:
    path = next((DATA / "swe_agent").glob("*.traj"))
    raw = json.loads(path.read_text())
    acting = sum(m["role"] == "assistant" and not m.get("is_demo") for m in raw["history"])
    states, stats = _states(path)
    assert sniff(path) == "swe_agent" and len(states) == acting == 4
    _check_invariants(states)
    assert {s.student_model for s in states} == {"gpt-4o"}
    assert states[0].student_action.tool_calls[0].name == "find_file"
    assert states[-1].metadata["outcome"]["exit_status"] == "submitted"
    assert stats.formats["swe_agent"]["states"] == 4


def test_swe_agent_trajectory_steps_without_history(tmp_path: Path) -> None:
    raw = json.loads(next((DATA / "swe_agent").glob("*.traj")).read_text())
    del raw["history"]
    _write(tmp_path, "old.traj", raw)
    states, _ = _states(tmp_path)
    assert len(states) == len(raw["trajectory"]) == 5
    _check_invariants(states)
    assert states[0].student_action.tool_calls[0].arguments == {"command": "find_file missing_colon.py"}
    assert states[1].messages[-1]["content"].startswith("Found 1 matches")


def test_openhands_output_rows() -> None:
    path = DATA / "openhands" / "output.jsonl"
    row = json.loads(path.read_text().splitlines()[0])
    responses = {e["tool_call_metadata"]["model_response"]["id"] for e in row["history"]
                 if e.get("source") == "agent" and "action" in e and e.get("tool_call_metadata")}
    states, stats = _states(path)
    assert sniff(path) == "openhands" and len(states) == len(responses) == 5
    _check_invariants(states)
    assert {s.student_model for s in states} == {"meta-llama/llama-4-maverick"}
    assert states[0].metadata["outcome"]["calls"][0]["exit_code"] == 0
    assert states[-1].metadata["outcome"]["kind"] == "no_result"   # trimmed before its observation


def test_openhands_actions_without_function_calling(tmp_path: Path) -> None:
    history = [{"id": 0, "source": "agent", "action": "system", "args": {"content": "sys"}},
               {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
               {"id": 2, "source": "agent", "action": "run",
                "args": {"command": "pytest", "thought": "Test."}},
               {"id": 3, "source": "agent", "observation": "run", "cause": 2, "content": "1 failed",
                "extras": {"metadata": {"exit_code": 1}}},
               {"id": 4, "source": "agent", "action": "message", "args": {"content": "Cannot fix."}},
               {"id": 5, "source": "agent", "action": "finish", "args": {"final_thought": "done"}}]
    row = {"instance_id": "x__1", "instruction": "fix", "history": history, "error": None,
           "metadata": {"llm_config": {"model": "deepseek/deepseek-chat"}}, "test_result": {"report": {}},
           "resolved": False}
    (tmp_path / "output.jsonl").write_text(json.dumps(row) + "\n")
    states, _ = _states(tmp_path)
    assert len(states) == sum(e.get("source") == "agent" and e.get("action") in ("run", "message", "finish")
                              for e in history) == 3
    _check_invariants(states)
    first = states[0]
    assert first.student_action.content == "Test."
    assert first.student_action.tool_calls[0].name == "execute_bash"
    assert first.student_action.tool_calls[0].arguments == {"command": "pytest"}
    assert first.metadata["outcome"]["kind"] == "error" and first.metadata["outcome"]["resolved"] is False
    assert first.metadata["recovery"] == states[1].state_id
    assert states[1].messages[-1]["content"] == "1 failed"
    assert {s.student_model for s in states} == {"deepseek/deepseek-chat"}


BASH_TOOL = {"type": "function", "function": {"name": "execute_bash", "description": "Run a command.",
                                               "parameters": {"type": "object", "required": ["command"],
                                                              "properties": {"command": {"type": "string"}}}}}


def atif_trajectories(folder: Path) -> list[Path]:
    """Two ATIF trajectories in the documented shape (Harbor's `trajectory-format` docs, ATIF-v1.5):
    one agent defining its tools (`agent.tool_definitions`) with tool calls, observations and
    reasoning; one JSON-commands agent answering in text, with a system step."""
    folder.mkdir(parents=True, exist_ok=True)
    tools = {"schema_version": "ATIF-v1.5", "session_id": "atif-tools",
             "agent": {"name": "openhands", "version": "1.0.0", "model_name": "openai/gpt-4o",
                       "tool_definitions": [BASH_TOOL]},
             "steps": [
                 {"step_id": 1, "source": "user", "message": "Create hello.txt with 'Hello, world!'."},
                 {"step_id": 2, "source": "agent", "message": "I'll look first.",
                  "reasoning_content": "The folder may hold it already.",
                  "tool_calls": [{"tool_call_id": "call_1", "function_name": "execute_bash",
                                  "arguments": {"command": "ls"}}],
                  "observation": {"results": [{"source_call_id": "call_1", "content": "README.md"}]}},
                 {"step_id": 3, "source": "agent", "message": "",
                  "tool_calls": [{"tool_call_id": "call_2", "function_name": "execute_bash",
                                  "arguments": {"command": "echo 'Hello, world!' > hello.txt"}}],
                  "observation": {"results": [{"source_call_id": "call_2", "content": ""}]}},
                 {"step_id": 4, "source": "agent", "message": "Done: hello.txt holds the greeting."}],
             "final_metrics": {"total_prompt_tokens": 900, "total_completion_tokens": 60}}
    text = {"schema_version": "ATIF-v1.5", "session_id": "atif-text",
            "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "openai/gpt-4o"},
            "steps": [
                {"step_id": 1, "source": "system", "message": "You solve tasks in a terminal."},
                {"step_id": 2, "source": "user", "message": "Create hello.txt."},
                {"step_id": 3, "source": "agent", "message": '{"commands": [{"keystrokes": "ls\\n"}]}'},
                {"step_id": 4, "source": "user", "message": "README.md"},
                {"step_id": 5, "source": "agent",
                 "message": '{"commands": [{"keystrokes": "echo hi > hello.txt\\n"}]}'},
                {"step_id": 6, "source": "agent", "message": '{"task_complete": true}'}]}
    paths = [folder / "tools.trajectory.json", folder / "text.trajectory.json"]
    for path, value in zip(paths, (tools, text), strict=True):
        path.write_text(json.dumps(value, indent=2))
    return paths


def test_atif_trajectories(tmp_path: Path) -> None:
    files = atif_trajectories(tmp_path / "atif")
    acting = sum(1 for f in files for s in json.loads(f.read_text())["steps"] if s["source"] == "agent")
    states, stats = _states(tmp_path / "atif")
    assert {sniff(f) for f in files} == {"atif"} and len(states) == acting == 6
    _check_invariants(states)
    defined = [s for s in states if "execute_bash" in {t["function"]["name"] for t in s.tools}]
    assert len(defined) == 3   # the first agent offers its own agent.tool_definitions
    assert stats.history["reasoning_dropped"] >= 1
    assert {s.student_model for s in states} == {"openai/gpt-4o"}


def _rows() -> list[dict[str, Any]]:
    tool = {"role": "assistant", "content": "look",
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "execute_bash", "arguments": "{\"command\": \"ls\"}"}}]}
    return [{"instance_id": "repo__1", "resolved": True, "model": "openai/gpt-4o",
             "messages": json.dumps([{"role": "system", "content": "sys"}, {"role": "user", "content": "fix"},
                                     tool, {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
                                     {"role": "assistant", "content": "done"}])},
            {"instance_id": "repo__2", "resolved": False, "model": "openai/gpt-4o",
             "messages": json.dumps([{"role": "user", "content": "fix"},
                                     {"role": "assistant", "content": "Check.\n```\ncat a.py\n```"},
                                     {"role": "user", "content": "OBSERVATION: x=1"}])}]


def test_trajectory_datasets_saved_parquet_and_jsonl(tmp_path: Path) -> None:
    from datasets import Dataset

    Dataset.from_list(_rows()).save_to_disk(str(tmp_path / "saved"))
    Dataset.from_list(_rows()).to_parquet(str(tmp_path / "rows.parquet"))
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    states, stats = _states(tmp_path)
    # Three copies of the same rows: repo__1's two turns and repo__2's one, once (a copied response
    # gives no second state).
    assert len(states) == 3
    _check_invariants(states)
    assert stats.skipped_files == {"dataset_side_file": 1}   # saved/state.json
    assert stats.formats["trajectory_dataset"] == {"files": 3, "states": 3}
    for each in (tmp_path / "saved" / "dataset_info.json", tmp_path / "rows.parquet",
                 tmp_path / "rows.jsonl"):
        assert sniff(each) in ("trajectory_dataset", "hf_dataset_info")
        assert len(_states(each)[0]) == 3
    resolved = [s.metadata["outcome"].get("resolved") for s in states]
    assert resolved.count(True) == 2 and resolved.count(False) == 1
    text = [s for s in states if s.trace_id.startswith("repo__2")][0].student_action
    assert text.content == "Check." and text.tool_calls[0].arguments == {"command": "cat a.py"}


@pytest.mark.parametrize("content", [
    b'{"schema_version": "ATIF-v1.5", "agent": {}, "steps": [{"source": "agent", "mess',   # truncated
    b'{"schema_version": "ATIF-v1.5", "agent": 3, "steps": 5}',
    b'{"info": {"mini_version": "1"}, "messages": "nope", "trajectory_format": "mini-swe-agent-1"}',
    b'{"trajectory": [1, "x", {"action": 3}], "history": {"a": 1}}',
    b'{"instance_id": "x", "history": [1, {"source": "agent", "action": "run", "args": 4}]}\n',
    b'{"messages": [{"role": "assistant", "tool_calls": [{"function": 3}]}, 7], "resolved": 1}\n',
    b'[{"role": "user", "content": "a list"}]',
    b'PAR1 not really parquet',
])
def test_garbled_trajectories_are_read_or_skipped_never_raised(tmp_path: Path, content: bytes) -> None:
    for name in ("t.traj.json", "t.traj", "t.jsonl", "t.parquet"):
        (tmp_path / name).write_bytes(content)
    stats = IngestStats()
    states = list(iter_states(tmp_path, IngestOptions(), stats))
    _check_invariants(states)
    assert stats.files == 4
    assert sum(c["files"] for c in stats.formats.values()) + sum(stats.skipped_files.values()) >= 4


def _in_vocabulary(body: dict[str, Any]) -> Reply:
    shells = {"Bash": lambda c: {"command": c}, "shell": lambda c: {"command": ["bash", "-lc", c]},
              "exec_command": lambda c: {"cmd": c}, "shell_command": lambda c: {"command": c},
              "bash": lambda c: {"command": c}}
    names = [t["function"]["name"] for t in body.get("tools") or ()]
    name = next(n for n in names if n in shells)
    command = COMMANDS[prompt_hash(body) % len(COMMANDS)]
    return Reply(chat_completion(tool_calls=[{"name": name, "arguments": shells[name](command)}],
                                 model=body.get("model", "")))


def test_mixed_folder_with_trajectories_trains_two_dpo_steps(fixtures_root: Path, tmp_path: Path) -> None:
    from datasets import load_from_disk

    from replay.run import main
    from tests.tiny_model import build_four_chars_tiny, train_dpo_two_steps

    mixed = tmp_path / "mixed"
    shutil.copytree(AGENTS / "codex" / "made", mixed / "codex")
    session = next(fixtures_root.rglob("fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"))
    (mixed / "claude").mkdir()
    shutil.copy(session, mixed / "claude" / session.name)
    _write(mixed / "mini", "a.traj.json", MINI_TEXT)
    (mixed / "garbage.traj").write_text('{"trajectory": [')
    states = list(iter_states(mixed, IngestOptions(max_length=4096), IngestStats()))
    tiny = build_four_chars_tiny(tmp_path / "tiny", states)
    with LLMServer(_in_vocabulary) as server:
        teachers = ",".join(f"{n}=openai/{n}@{server.url}" for n in ("ta", "tb", "tc"))
        out = tmp_path / "out"
        assert main(["--source", str(mixed), "--out", str(out), "--teachers", teachers,
                     "--cache", str(tmp_path / "cache.sqlite"), "--max-length", "4096"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["formats"]) == {"claude_code", "codex", "mini_swe_agent"}
    assert report["states_failed"] == 0
    dataset = load_from_disk(str(out / "dataset"))
    assert {row["source"] for row in dataset} == {"claude_code", "codex", "mini_swe_agent"}

    trainer, output = train_dpo_two_steps(tiny, dataset, tmp_path / "train")
    assert trainer.state.global_step == 2 and math.isfinite(output.training_loss)


def test_every_trajectory_fixture_cut_anywhere_reads_without_an_exception(tmp_path: Path) -> None:
    fixtures = sorted(p for p in DATA.rglob("*") if p.is_file() and p.name != "README.md")
    fixtures += atif_trajectories(tmp_path / "atif")
    assert len(fixtures) == 6
    for n, path in enumerate(fixtures):
        data = path.read_bytes()
        for cut in (1, 2, 3, 5, 8, 13):
            target = tmp_path / "cut" / f"{n}-{cut}" / path.name
            target.parent.mkdir(parents=True)
            target.write_bytes(data[: len(data) * cut // 14])
    stats = IngestStats()
    states = list(iter_states(tmp_path / "cut", IngestOptions(), stats))
    _check_invariants(states)
    assert stats.files == 36
    # A cut whole-file JSON is a counted skip (`bad_json`, or `unknown_format` when the cut comes before
    # the keys that name its format); the cut OpenHands row is a truncated line, and the objects complete
    # inside it are pieces of it, not records (issue #55: they were read as records after a lost piece).
    assert stats.skipped_files["bad_json"] + stats.skipped_files["unknown_format"] == 30
    assert stats.skipped_lines == {"truncated_line": 6}
