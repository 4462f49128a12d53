"""Bad input never stops a run: each case is counted by reason, with file and line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ingestion.store import load_states
from replay.run import main
from tests.sessions import assistant, basic_session, text, tool_result, tool_use, user, write_session

GOOD_STATES = 2  # basic_session has two turns


def run_dry(source: Path, out: Path) -> dict:
    assert main(["--source", str(source), "--out", str(out), "--dry-run"]) == 0
    return json.loads((out / "report.json").read_text())


def lines_of(records: list) -> list[bytes]:
    return [json.dumps(r).encode() + b"\n" for r in records]


def states_in(out: Path) -> list[dict]:
    return [state.model_dump(mode="json") for state in load_states(out)]


def problems(report: dict, reason: str) -> list[dict]:
    return [p for p in report["problems"] if p["reason"] == reason]


def test_half_written_last_line(tmp_path: Path) -> None:
    good = lines_of(basic_session())
    path = write_session(tmp_path / "p", [*good, b'{"parentUuid":"a2","type":"user","mess'])
    report = run_dry(path, tmp_path / "out")
    assert report["skipped_lines"] == {"truncated_line": 1}
    assert problems(report, "truncated_line") == [
        {"file": str(path), "line": 5, "reason": "truncated_line", "action": "skipped"}]
    assert report["states"] == GOOD_STATES


def test_corrupt_line_mid_file(tmp_path: Path) -> None:
    good = lines_of(basic_session())
    path = write_session(tmp_path / "p", [good[0], b'{"type": "user", "uuid": ]]]\n', *good[1:]])
    report = run_dry(path, tmp_path / "out")
    assert report["skipped_lines"] == {"undecodable_line": 1}
    assert problems(report, "undecodable_line")[0]["line"] == 2
    assert report["states"] == GOOD_STATES


def test_two_records_on_one_line_and_a_crash_stub(tmp_path: Path) -> None:
    good = lines_of(basic_session())
    glued = good[1].rstrip(b"\n") + good[2]                   # two whole records on one line
    stub = b'{"type":"pr-link","sessionId":"s","prNu' + good[3]  # a crash stub, then the next record
    path = write_session(tmp_path / "p", [good[0], glued, stub])
    report = run_dry(path, tmp_path / "out")
    assert report["repaired_lines"] == {"concatenated_records": 1}
    assert report["skipped_lines"] == {"truncated_record": 1}
    assert problems(report, "truncated_record")[0]["line"] == 3
    assert report["states"] == GOOD_STATES


def test_non_utf8_bytes(tmp_path: Path) -> None:
    records = basic_session()
    records[2] = user("u2", "a1", tool_result("toolu_1", "caf\u00e9 PLACEHOLDER"))
    raw = lines_of(records)
    raw[2] = raw[2].replace(b"PLACEHOLDER", b"\xff\xfe bytes")
    path = write_session(tmp_path / "p", raw)
    report = run_dry(path, tmp_path / "out")
    assert report["repaired_lines"] == {"invalid_utf8": 1}
    assert problems(report, "invalid_utf8")[0]["line"] == 3
    states = states_in(tmp_path / "out")
    assert len(states) == GOOD_STATES
    assert "\ufffd" in states[1]["messages"][-1]["content"]  # the tool result survived, repaired


def test_empty_file_beside_a_good_one(tmp_path: Path) -> None:
    write_session(tmp_path / "p", basic_session())
    empty = write_session(tmp_path / "p", [], name="empty")
    report = run_dry(tmp_path / "p", tmp_path / "out")
    assert report["skipped_files"] == {"empty_file": 1}
    assert problems(report, "empty_file") == [
        {"file": str(empty), "line": None, "reason": "empty_file", "action": "file"}]
    assert report["files"] == 2 and report["states"] == GOOD_STATES


def test_twenty_megabyte_tool_result(tmp_path: Path) -> None:
    records = basic_session()
    records[2] = user("u2", "a1", tool_result("toolu_1", "x" * 20_000_000))
    path = write_session(tmp_path / "p", records)
    report = run_dry(path, tmp_path / "out")
    states = states_in(tmp_path / "out")
    assert len(states) == GOOD_STATES
    result = states[1]["messages"][-1]
    assert result["role"] == "tool" and len(result["content"]) < 50_000
    assert "characters cut" in result["content"]
    assert report["budget"]["truncated_messages"] == 1


def test_unknown_record_type(tmp_path: Path) -> None:
    records = basic_session()
    records.insert(1, {"type": "hologram-snapshot", "sessionId": "s", "payload": {"x": 1}})
    records.insert(2, {"type": "progress", "uuid": "p1", "parentUuid": "u1", "data": {"type": "new"}})
    records[3]["parentUuid"] = "p1"  # the assistant hangs off the progress record
    report = run_dry(write_session(tmp_path / "p", records), tmp_path / "out")
    assert report["record_types"]["hologram-snapshot"] == 1
    assert report["skipped_records"] == {"hologram-snapshot": 1, "progress": 1}
    assert report["skipped_lines"] == {}
    states = states_in(tmp_path / "out")
    assert len(states) == GOOD_STATES
    assert states[0]["messages"][1]["content"] == "list the files"  # history crosses the unknown node


def test_assistant_without_message(tmp_path: Path) -> None:
    records = basic_session()
    broken = {k: v for k, v in assistant("ax", "u2", "msg_x", text("")).items() if k != "message"}
    records.insert(3, broken)
    records[4]["parentUuid"] = "ax"
    path = write_session(tmp_path / "p", records)
    report = run_dry(path, tmp_path / "out")
    assert report["skipped_lines"] == {"assistant_without_message": 1}
    assert problems(report, "assistant_without_message")[0]["line"] == 4
    states = states_in(tmp_path / "out")
    assert len(states) == GOOD_STATES
    assert states[1]["messages"][-1]["content"] == "a.py\nb.py"


def test_api_error_lines_are_not_turns(tmp_path: Path) -> None:
    records = basic_session()
    error = assistant("e1", "u2", "e5bbbf08-cfab-4571-969f-6afa8a3c6b8d", text("API Error: 500"),
                      model="<synthetic>", isApiErrorMessage=True, error="server_error")
    records.insert(3, error)
    records[4]["parentUuid"] = "e1"
    report = run_dry(write_session(tmp_path / "p", records), tmp_path / "out")
    assert report["states"] == GOOD_STATES and report["skipped_turns"]["api_error"] == 1
    assert "API Error" not in json.dumps(states_in(tmp_path / "out"))


@pytest.mark.parametrize("make", ["missing", "no_sessions"])
def test_bad_source_is_one_line_and_exit_2(tmp_path: Path, make: str) -> None:
    source = tmp_path / "nothing-here"
    if make == "no_sessions":
        source.mkdir()
        (source / "notes.txt").write_text("hi")
    done = subprocess.run([sys.executable, "-m", "replay.run", "--source", str(source), "--dry-run",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")
    assert "Traceback" not in done.stderr


def test_redacted_thinking_and_images(tmp_path: Path) -> None:
    records = [
        user("u1", None, [{"type": "text", "text": "what is in this screenshot?"},
                          {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                       "data": "iVBORw0KGgo" * 1000}}]),
        assistant("a1", "u1", "msg_1", {"type": "redacted_thinking", "data": "EvAFCkYIBBgCKkA"}),
        assistant("a2", "a1", "msg_1", tool_use("toolu_1", "file shot.png")),
        user("u2", "a2", [{"type": "tool_result", "tool_use_id": "toolu_1",
                           "content": [{"type": "text", "text": "PNG image"},
                                       {"type": "image", "source": {"type": "base64", "data": "AAAA"}}]}]),
        assistant("a3", "u2", "msg_2", text("A login form.")),
    ]
    run_dry(write_session(tmp_path / "p", records), tmp_path / "out")
    states = states_in(tmp_path / "out")
    assert len(states) == 2
    dumped = json.dumps(states[1]["messages"])
    assert "EvAFCkYIBBgCKkA" not in dumped and "iVBORw0KGgo" not in dumped
    assert states[1]["messages"][1]["content"] == "what is in this screenshot?\n[image]"
    assert states[1]["messages"][-1]["content"] == "PNG image\n[image]"
