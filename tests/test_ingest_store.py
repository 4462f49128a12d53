"""States on disk: every message once per trace, and the one reader gives back exactly what was written."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from ingestion.options import IngestOptions
from ingestion.schema import Action, TraceState
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from ingestion.store import STATES_FILE, TRACES_FILE, StateWriter, StoreError, load_states, write_states
from replay.ablate import main as ablate_main
from replay.run import main as run_main
from tests.sessions import assistant, text, tool_result, tool_use, user, write_session


def fixture_states(root: Path) -> list[TraceState]:
    return list(iter_states(root, IngestOptions(include_subagents=True), IngestStats()))


def dumped(states: list[TraceState]) -> list[dict]:
    return [s.model_dump(mode="json") for s in states]


def trace_lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / TRACES_FILE).read_text().splitlines()]


def test_round_trip_of_every_fixture_state(fixtures_root: Path, tmp_path: Path) -> None:
    states = fixture_states(fixtures_root)
    assert write_states(states, tmp_path) == len(states) > 300
    assert dumped(list(load_states(tmp_path))) == dumped(states)
    assert dumped(list(load_states(tmp_path / STATES_FILE))) == dumped(states)   # the file works too


def test_each_message_is_stored_once_per_trace(fixtures_root: Path, tmp_path: Path) -> None:
    states = fixture_states(fixtures_root)
    write_states(states, tmp_path)
    distinct = {(s.trace_id, orjson.dumps(m)) for s in states for m in s.messages}
    stored = [line for line in trace_lines(tmp_path) if "message" in line]
    assert len(stored) == len(distinct)
    full = sum(len(orjson.dumps(s.model_dump(mode="json"))) for s in states)
    linear = (tmp_path / STATES_FILE).stat().st_size + (tmp_path / TRACES_FILE).stat().st_size
    assert linear * 5 < full   # histories are no longer repeated per state
    rows = [json.loads(line) for line in (tmp_path / STATES_FILE).read_text().splitlines()]
    ranges = [len(row["messages"]) for row in rows]   # a history is a few index ranges (a repeated
    assert max(ranges) <= 5 and sum(ranges) < 1.5 * len(rows)   # message points back at its copy)


def long_session(turns: int) -> list[dict]:
    records, parent = [user("u0", None, "start")], "u0"
    for i in range(turns):
        records += [assistant(f"a{i}", parent, f"msg_{i}", tool_use(f"toolu_{i}", f"cat f{i}")),
                    user(f"r{i}", f"a{i}", tool_result(f"toolu_{i}", f"line {i}\n" * 50))]
        parent = f"r{i}"
    return records


@pytest.mark.parametrize("max_prompt_tokens", [100_000, 2_000])
def test_a_long_session_grows_linearly(tmp_path: Path, max_prompt_tokens: int) -> None:
    session = write_session(tmp_path / "p", long_session(300))
    out = tmp_path / "out"
    assert run_main(["--source", str(session), "--out", str(out), "--dry-run",
                     "--max-prompt-tokens", str(max_prompt_tokens)]) == 0
    written = (out / STATES_FILE).stat().st_size + (out / TRACES_FILE).stat().st_size
    assert written < 1.5 * session.stat().st_size
    states = list(load_states(out))
    assert len(states) == 300 and states[-1].messages[1]["content"] == "start"
    if max_prompt_tokens == 2_000:   # trimmed: the first prompt, then the latest exchanges only
        assert len(states[-1].messages) < 60


def make_state(trace: str, turn: int, messages: list[dict]) -> TraceState:
    return TraceState(state_id=f"claude_code:{trace}:{turn}", trace_id=trace, turn=turn, source="claude_code",
                      messages=messages, tools=[{"type": "function", "function": {"name": "Bash"}}],
                      student_action=Action(content=f"turn {turn}"), student_model="m")


def test_interleaved_traces_rebuild_and_equal_messages_are_stored_once(tmp_path: Path) -> None:
    system = {"role": "system", "content": "sys"}
    a0 = make_state("a", 0, [system, {"role": "user", "content": "hi a"}])
    b0 = make_state("b", 0, [dict(system), {"role": "user", "content": "hi b"}])
    a1 = make_state("a", 1, [{"role": "system", "content": "sys"}, *a0.messages[1:],
                             {"role": "assistant", "content": "turn 0"}, {"role": "user", "content": "go"}])
    write_states([a0, b0, a1], tmp_path)
    assert dumped(list(load_states(tmp_path))) == dumped([a0, b0, a1])
    lines = trace_lines(tmp_path)
    assert [line["trace_id"] for line in lines if "trace_id" in line] == ["a", "b", "a"]   # 3 segments
    third = [line for line in lines if line["segment"] == 2 and "message" in line]
    assert [m["value"]["content"] for m in third] == ["sys", "hi a", "turn 0", "go"]


def test_transform_runs_once_per_distinct_message(tmp_path: Path) -> None:
    seen: list[str] = []

    def shout(message: dict) -> dict:
        seen.append(message["content"])
        return {**message, "content": message["content"].upper()}

    history = [{"role": "user", "content": "one"}]
    states = [make_state("t", i, history + [{"role": "user", "content": f"n{j}"} for j in range(i)])
              for i in range(4)]
    with StateWriter(tmp_path, transform=shout) as writer:
        for state in states:
            writer.write(state)
    assert sorted(seen) == ["n0", "n1", "n2", "one"]   # equal copies (validation copies) found by content
    assert [m["content"] for m in list(load_states(tmp_path))[-1].messages] == ["ONE", "N0", "N1", "N2"]
    assert len([line for line in trace_lines(tmp_path) if "message" in line]) == 4


def test_older_runs_with_one_full_state_per_line_still_load(tmp_path: Path) -> None:
    state = make_state("t", 0, [{"role": "user", "content": "hi"}])
    (tmp_path / STATES_FILE).write_bytes(orjson.dumps(state.model_dump(mode="json")) + b"\n")
    assert dumped(list(load_states(tmp_path))) == dumped([state])


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), StateWriter(tmp_path) as writer:
        writer.write(make_state("t", 0, [{"role": "user", "content": "hi"}]))
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_mismatched_trace_table_is_one_clear_error(tmp_path: Path) -> None:
    write_states([make_state("t", i, [{"role": "user", "content": f"m{j}"} for j in range(i + 1)])
                  for i in range(3)], tmp_path)
    lines = (tmp_path / TRACES_FILE).read_bytes().splitlines(keepends=True)
    (tmp_path / TRACES_FILE).write_bytes(b"".join(lines[:-1]))   # the last message is gone
    with pytest.raises(StoreError, match="traces.jsonl ends before segment 0"):
        list(load_states(tmp_path))


def test_ablate_reads_states_through_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    write_states([make_state("t", 0, [{"role": "user", "content": "hi"}])], run)
    (run / "states.jsonl").write_text('{"segment": 0, "messages": "nonsense"}\n')
    config = {"source": "x", "out": str(run), "pool": {"teachers": "gpt-5,deepseek"}}
    (run / "run.json").write_text(json.dumps(config))
    (run / "proposals.jsonl").write_text("")
    assert ablate_main(["--run", str(run), "--all-subsets"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "states.jsonl:1" in error and error.count("\n") == 1


def test_dry_run_states_are_what_ingestion_made(tmp_path: Path) -> None:
    session = write_session(tmp_path / "p", [
        user("u1", None, "hello"), assistant("a1", "u1", "msg_1", text("hi")),
        user("u2", "a1", "bye"), assistant("a2", "u2", "msg_2", text("bye"))])
    assert run_main(["--source", str(session), "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    direct = list(iter_states(session, IngestOptions(), IngestStats()))
    assert dumped(list(load_states(tmp_path / "out"))) == dumped(direct)


def test_states_cli_prints_states_in_full(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from replay.states import main as states_main

    states = [make_state("a", 0, [{"role": "user", "content": "hi"}]),
              make_state("b", 0, [{"role": "user", "content": "yo"}])]
    write_states(states, tmp_path / "out")
    assert states_main([str(tmp_path / "out"), "claude_code:b:0"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == dumped(states[1:])
    assert states_main([str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.startswith("error: cannot read")
