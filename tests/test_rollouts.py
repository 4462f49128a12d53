"""ingestion/rollouts.py: collected rollout files → TraceStates, bad lines counted, never raised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collect.config import load_agent_spec
from collect.records import RolloutWriter
from ingestion.rollout_format import FinalRecord, Observation, RolloutHeader, TurnRecord
from ingestion.rollouts import is_rollout_file, iter_rollout_states
from ingestion.stats import IngestStats

SPEC = load_agent_spec()
FIRST = SPEC.first_messages("add() subtracts")
CALL = {"id": "c0", "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "cat calc.py"}'}}
BAD_CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls'}}


def header() -> RolloutHeader:
    return RolloutHeader(rollout_id="toy__calc-1.run1", run_id="run1", instance_id="toy__calc-1",
                         repo="toy/calc", image="img", student_model="Qwen/Qwen3-Coder-30B-A3B-Instruct",
                         student_url="http://x/v1", max_turns=30, agent_version=SPEC.version,
                         tools=SPEC.tools, created_at="2025-01-01")


def turns() -> list[TurnRecord]:
    response = {"role": "assistant", "content": "", "tool_calls": [CALL]}
    first = TurnRecord(turn=0, messages=FIRST, response=response,
                       reasoning="look first", finish_reason="tool_calls", prompt_token_ids=[1, 2, 3],
                       completion_token_ids=[7, 8], logprobs=[-0.5, -0.25], tokens=["a", "b"],
                       observations=[Observation(tool_call_id="c0", name="bash", output="x\n[exit code: 0]")])
    history = [*FIRST, first.response, {"role": "tool", "tool_call_id": "c0", "content": "x\n[exit code: 0]"}]
    second = TurnRecord(turn=1, messages=history, response={"role": "assistant", "content": "done"},
                        finish_reason="stop", prompt_token_ids=[1, 2, 3, 4], completion_token_ids=[9],
                        logprobs=[-0.1], tokens=["c"])
    return [first, second]


def write(path: Path, final: FinalRecord | None = None, extra: list[bytes] = ()) -> Path:
    with RolloutWriter(path) as writer:
        writer.write(header())
        for turn in turns():
            writer.write(turn)
        if final:
            writer.write(final)
    with path.open("ab") as handle:
        for line in extra:
            handle.write(line)
    return path


FINAL = FinalRecord(exit_status="submitted", turns=2, patch="diff --git a/calc.py ...", reward=1.0,
                    resolved=True)


def test_one_state_per_student_turn(tmp_path: Path) -> None:
    stats = IngestStats()
    states = list(iter_rollout_states(write(tmp_path / "toy__calc-1.rollout.jsonl", FINAL), stats))
    assert [s.state_id for s in states] == ["swebench_rollout:toy__calc-1.run1:0",
                                            "swebench_rollout:toy__calc-1.run1:1"]
    first, second = states
    assert (first.source, first.trace_id, first.turn) == ("swebench_rollout", "toy__calc-1.run1", 0)
    assert first.messages == FIRST and first.messages[0]["role"] == "system"
    assert first.tools == SPEC.tools and first.student_model == "Qwen/Qwen3-Coder-30B-A3B-Instruct"
    assert first.student_action.tool_calls[0].model_dump() == {"id": "c0", "name": "bash",
                                                               "arguments": {"command": "cat calc.py"}}
    assert first.student_action.thinking == "look first"
    assert second.messages[2]["tool_calls"][0]["function"]["arguments"] == {"command": "cat calc.py"}
    assert second.student_action.content == "done" and not second.student_action.tool_calls
    keys = ("instance_id", "reward", "prompt_token_ids", "completion_token_ids", "logprobs")
    assert {k: first.metadata[k] for k in keys} == {
        "instance_id": "toy__calc-1", "reward": 1.0, "prompt_token_ids": [1, 2, 3],
        "completion_token_ids": [7, 8], "logprobs": [-0.5, -0.25]}
    assert second.metadata["reward"] == 1.0 and second.metadata["resolved"] is True
    assert (stats.traces, stats.states, stats.lines) == (1, 2, 4)  # files: counted by the source walk
    assert stats.record_types == {"header": 1, "turn": 2, "final": 1}
    assert not stats.problems


def test_bad_lines_are_counted_and_the_rest_ingested(tmp_path: Path) -> None:
    bad_turn = json.dumps({"type": "turn", "turn": 5}).encode() + b"\n"
    duplicate = json.dumps(turns()[0].model_dump()).encode() + b"\n"
    extra = [b"\xff\xfe not utf-8\n", b'{"type": "turn", "turn": 2, "messa\n', bad_turn, duplicate,
             b'{"type": "progress"}\n', b"[1, 2]\n"]
    stats = IngestStats()
    states = list(iter_rollout_states(write(tmp_path / "a.rollout.jsonl", FINAL, extra), stats))
    assert [s.turn for s in states] == [0, 1]
    assert stats.skipped_lines == {"undecodable_line": 2, "invalid_turn_record": 1, "duplicate_turn": 1,
                                   "not_an_object": 1}
    assert stats.skipped_records == {"progress": 1}
    assert [p["line"] for p in stats.problems] == [5, 6, 7, 8, 10]


def test_a_rollout_without_its_final_record_keeps_its_turns(tmp_path: Path) -> None:
    stats = IngestStats()
    states = list(iter_rollout_states(write(tmp_path / "a.rollout.jsonl"), stats))
    assert [s.metadata["reward"] for s in states] == [None, None]
    assert stats.repaired_lines == {"no_final_record": 1}


@pytest.mark.parametrize("content", [b"", b'{"type": "turn", "turn": 0}\n', b"not json\n",
                                     b'{"type": "header", "format": "other"}\n'])
def test_a_file_without_a_header_gives_no_state(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "a.rollout.jsonl"
    path.write_bytes(content)
    stats = IngestStats()
    assert list(iter_rollout_states(path, stats)) == []
    assert stats.skipped_files == {"no_rollout_header": 1} and stats.traces == 0


def test_a_missing_file_is_counted(tmp_path: Path) -> None:
    stats = IngestStats()
    assert list(iter_rollout_states(tmp_path / "gone.rollout.jsonl", stats)) == []
    assert stats.skipped_files == {"unreadable_file": 1}


def test_invalid_tool_arguments_are_kept_raw(tmp_path: Path) -> None:
    path = tmp_path / "a.rollout.jsonl"
    with RolloutWriter(path) as writer:
        writer.write(header())
        writer.write(TurnRecord(turn=0, messages=FIRST,
                                response={"role": "assistant", "content": "", "tool_calls": [BAD_CALL]}))
    (state,) = iter_rollout_states(path, IngestStats())
    assert state.student_action.tool_calls[0].arguments == {"_raw_arguments": '{"command": "ls'}
    assert state.metadata["prompt_token_ids"] is None


@pytest.mark.parametrize("name, expected", [
    ("out/astropy__astropy-12907.rollout.jsonl", True), ("x.rollout.jsonl.tmp", False),
    ("session.jsonl", False), ("report.json", False),
])
def test_is_rollout_file(name: str, expected: bool) -> None:
    assert is_rollout_file(name) is expected
    assert is_rollout_file(Path(name)) is expected


def test_the_fields_of_issue_15_are_read(tmp_path: Path) -> None:
    """A v1 header with the sampling record, a feedback observation (no call id) and context_overflow."""
    path = tmp_path / "a.rollout.jsonl"
    cut = TurnRecord(turn=0, messages=FIRST, response={"role": "assistant", "content": "<tool_call>{"},
                     finish_reason="length", reasoning="\nhm\n", reasoning_field="reasoning",
                     observations=[Observation(tool_call_id=None, name="", output="error: cut",
                                               error="truncated_reply")])
    with RolloutWriter(path) as writer:
        writer.write(header().model_copy(update={
            "sampling": {"temperature": 0.7, "top_p": 0.95}, "logprobs_mode": "raw_logprobs",
            "reasoning_echo": "field", "max_model_len": 4096}))
        writer.write(cut)
        writer.write(FinalRecord(exit_status="context_overflow", turns=1, patch="diff", reward=0.0))
    stats = IngestStats()
    (state,) = iter_rollout_states(path, stats)
    assert (state.metadata["exit_status"], state.metadata["reward"]) == ("context_overflow", 0.0)
    assert state.metadata["sampling"] == {"temperature": 0.7, "top_p": 0.95}
    assert state.metadata["logprobs_mode"] == "raw_logprobs" and state.metadata["finish_reason"] == "length"
    assert state.student_action.thinking == "\nhm\n" and not stats.problems
