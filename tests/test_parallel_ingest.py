"""Ingestion on worker processes writes the very bytes one process writes (replay/parallel_ingest.py):
states, trace table and report, including resumed sessions (read again in the main process) and a
trace that goes on from one file into the next (the whole source read again in one process)."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from ingestion.options import IngestOptions
from replay.pipeline import ingest_to_file
from teachers.redact_state import StateRedactor
from tests.sessions import assistant, basic_session, text, user, with_session, write_session

KEY = b"k" * 32
SECRET = "ghp_aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2z4c"


def ingest(source: Path, out: Path, workers: int, **options: Any) -> tuple[dict[str, Any], bytes, bytes]:
    report, _ = ingest_to_file(source, out, IngestOptions(workers=workers, **options),
                               Console(file=io.StringIO()), StateRedactor(KEY))
    return report.model_dump(), (out / "states.jsonl").read_bytes(), (out / "traces.jsonl").read_bytes()


def both(source: Path, tmp_path: Path, **options: Any) -> tuple[tuple, tuple]:
    return ingest(source, tmp_path / "one", 1, **options), ingest(source, tmp_path / "two", 2, **options)


def same(one: tuple, two: tuple, workers: int) -> None:
    report_one, report_two = dict(one[0]), dict(two[0])
    assert report_one["extra"].pop("ingest_workers") == 1
    assert report_two["extra"].pop("ingest_workers") == workers
    assert report_two == report_one
    assert two[1] == one[1]
    assert two[2] == one[2]


@pytest.mark.parametrize("subagents", [False, True])
def test_the_fixtures_give_the_same_bytes_on_two_workers(fixtures_root: Path, tmp_path: Path,
                                                         subagents: bool) -> None:
    one, two = both(fixtures_root, tmp_path, include_subagents=subagents)
    assert one[0]["states"] > 100 and one[0]["files"] > 10
    same(one, two, workers=2)


def secret_session(session: str, tag: str) -> list[dict[str, Any]]:
    records = basic_session() + [user("u3", "a2", f"deploy with {SECRET}"),
                                 assistant("a3", "u3", "msg_3", text("Done.")),
                                 user("u4", "a3", "again"),
                                 assistant("a4", "u4", "msg_4", text("Done again."))]
    return with_session(records, session, msg_tag=tag)


def test_secrets_are_counted_once_per_trace_as_in_one_process(tmp_path: Path) -> None:
    for n in range(6):
        write_session(tmp_path / "src", secret_session(f"s{n}", f"-{n}"), name=f"s{n}")
    one, two = both(tmp_path / "src", tmp_path)
    assert one[0]["redactions"] == {"github-pat": 6}   # one secret in each of six traces, many states
    assert SECRET.encode() not in two[1] + two[2]
    same(one, two, workers=2)


def test_a_resumed_session_read_apart_is_read_again_against_its_original(tmp_path: Path) -> None:
    source = tmp_path / "src"
    write_session(source, basic_session(), name="aaaaaaaa-0000-0000-0000-000000000001")
    resumed = basic_session() + [user("u3", "a2", "and the tests?"),
                                 assistant("a3", "u3", "msg_3", text("None yet."))]
    # Claude Code's --resume: a new session whose file starts with a copy of the old one's messages
    write_session(source, with_session(resumed, "bbbbbbbb-0000-0000-0000-000000000002"),
                  name="bbbbbbbb-0000-0000-0000-000000000002")
    one, two = both(source, tmp_path)
    assert one[0]["skipped_turns"]["duplicate_message_id"] == 2   # the worker alone saw no duplicate
    same(one, two, workers=2)


def test_a_trace_going_on_into_the_next_file_sends_the_source_back_to_one_process(tmp_path: Path) -> None:
    # a: session T1 (msg_1, msg_2); b: session T2 copies them and adds msg_3 (state T2:2 only);
    # c: session T2 again with new messages: states T2:0 and T2:1, free, so trace T2 goes on from b to c.
    source = tmp_path / "src"
    write_session(source, with_session(basic_session(), "T1"), name="a")
    write_session(source, with_session(basic_session() + [user("u3", "a2", "more"),
                                                          assistant("a3", "u3", "msg_3", text("More."))],
                                       "T2"), name="b")
    write_session(source, with_session(basic_session(), "T2", msg_tag="-c"), name="c")
    one, two = both(source, tmp_path)
    traces = [line for line in one[2].splitlines() if b'"trace_id"' in line]
    assert len(traces) == 2 and b'"T2"' in traces[1]   # b and c write one segment: one trace, no break
    same(one, two, workers=2)


def test_with_another_thread_running_the_workers_come_from_a_fork_server(fixtures_root: Path,
                                                                         tmp_path: Path) -> None:
    stop = threading.Event()
    busy = threading.Thread(target=stop.wait, daemon=True)
    busy.start()
    try:
        one, two = both(fixtures_root, tmp_path)
    finally:
        stop.set()
    same(one, two, workers=2)
