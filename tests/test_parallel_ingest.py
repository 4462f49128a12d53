"""Ingestion on worker processes writes the very bytes one process writes (replay/ingest/parallel.py):
states, trace table and report, whatever the files' cross-references: resumed and copied sessions
(repeated message ids), one session id in two files (taken state ids), a trace that goes on from one
file into the next (one segment, a recovery across files, a secret counted once per trace)."""

from __future__ import annotations

import copy
import io
import json
import random
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bench.continuing_sessions import KINDS, arrange
from ingestion.options import IngestOptions
from replay.ingest.read import ingest_to_file
from teachers.redact_state import StateRedactor
from tests.sessions import assistant, basic_session, text, tool_use, user, with_session, write_session

KEY = b"k" * 32
SECRET = "ghp_aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2z4c"


def ingest(source: Path, out: Path, workers: int, **options: Any) -> tuple[dict[str, Any], bytes, bytes]:
    report, _ = ingest_to_file(source, out, IngestOptions(workers=workers, **options),
                               Console(file=io.StringIO()), StateRedactor(KEY))
    return report.model_dump(), (out / "states.jsonl").read_bytes(), (out / "traces.jsonl").read_bytes()


def both(source: Path, tmp_path: Path, **options: Any) -> tuple[tuple, tuple]:
    return ingest(source, tmp_path / "one", 1, **options), ingest(source, tmp_path / "two", 2, **options)


def same(one: tuple, two: tuple, workers: int) -> None:
    report_one, report_two = copy.deepcopy(one[0]), copy.deepcopy(two[0])
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


def test_a_resumed_session_gives_no_state_twice_on_workers(tmp_path: Path) -> None:
    source = tmp_path / "src"
    write_session(source, basic_session(), name="aaaaaaaa-0000-0000-0000-000000000001")
    resumed = basic_session() + [user("u3", "a2", "and the tests?"),
                                 assistant("a3", "u3", "msg_3", text("None yet."))]
    # Claude Code's --resume: a new session whose file starts with a copy of the old one's messages
    write_session(source, with_session(resumed, "bbbbbbbb-0000-0000-0000-000000000002"),
                  name="bbbbbbbb-0000-0000-0000-000000000002")
    one, two = both(source, tmp_path)
    assert one[0]["skipped_turns"]["duplicate_message_id"] == 2
    same(one, two, workers=2)


def test_a_trace_going_on_into_the_next_file_is_one_segment_on_workers(tmp_path: Path) -> None:
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


def failing_session(session: str, secret: str = SECRET) -> list[dict[str, Any]]:
    """msg_1 runs a command holding `secret`, which fails: its state fails (recovered by the next)."""
    return with_session([
        user("u1", None, "deploy it"),
        assistant("a1", "u1", "msg_1", tool_use("toolu_1", f"deploy --token {secret}")),
        user("u2", "a1", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Exit code 1\nboom",
                           "is_error": True}]),
    ], session, msg_tag=session)


def going_on(session: str, *tags: str) -> list[dict[str, Any]]:
    """The failing session copied (resumed on another machine), then one more turn per tag."""
    records = failing_session(session)
    parent = "u2"
    for n, tag in enumerate(tags):
        records += with_session([user(f"u{tag}", parent, f"try again {tag}"),
                                 assistant(f"a{tag}", f"u{tag}", f"msg_{tag}",
                                           text(f"Done {tag} without {SECRET}."))], session, msg_tag=session)
        parent = f"a{tag}"
        assert n < 9
    return records


def states_of(out: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_recoveries_and_secrets_across_files_are_those_of_one_process(tmp_path: Path) -> None:
    # T: a holds its failing turn; b (all turns repeated: no state) between; c and d go on with the
    # trace, each copying what came before. One segment for T, a's state recovered by c's first, the
    # secret counted once for T although a, c and d all hold it; then U, two files apart, the same.
    source = tmp_path / "src"
    write_session(source, failing_session("T"), name="a")
    write_session(source, failing_session("T"), name="b")
    write_session(source, going_on("T", "3"), name="c")
    write_session(source, going_on("T", "3", "4"), name="d")
    write_session(source, failing_session("U"), name="e")
    write_session(source, going_on("U", "5", "6"), name="f")
    for workers in (2, 3):
        one = ingest(source, tmp_path / f"one{workers}", 1)
        two = ingest(source, tmp_path / f"two{workers}", workers)
        same(one, two, workers=workers)
    rows = states_of(one[1])
    assert [r["state_id"] for r in rows] == ["claude_code:T:0", "claude_code:T:1", "claude_code:T:2",
                                            "claude_code:U:0", "claude_code:U:1", "claude_code:U:2"]
    assert rows[0]["metadata"]["recovery"] == "claude_code:T:1"     # a's state, recovered in c
    assert rows[3]["metadata"]["recovery"] == "claude_code:U:1"
    assert one[0]["redactions"] == {"github-pat": 2}                 # once for T, once for U
    assert one[2].count(b'"trace_id"') == 2                          # T and U: one segment each
    assert one[0]["skipped_turns"]["duplicate_message_id"] == 5


def test_one_session_id_in_two_files_takes_distinct_ids_on_workers(tmp_path: Path) -> None:
    # p2 holds other turns of session S (another machine's): its state ids are taken, it becomes S~hash;
    # p3 repeats p2's turns and adds one, S:2, free again: back to S (its own file's new turns decide).
    source = tmp_path / "src"
    write_session(source, with_session(basic_session(), "S"), name="p1")
    write_session(source, with_session(basic_session(), "S", msg_tag="-2"), name="p2")
    more = basic_session() + [user("u3", "a2", "more"), assistant("a3", "u3", "msg_3", text("More."))]
    write_session(source, with_session(more, "S", msg_tag="-2"), name="p3")
    one, two = both(source, tmp_path)
    renamed = states_of(one[1])[2]["trace_id"]
    assert renamed.startswith("S~") and one[0]["trace_id_collisions"] == 1
    assert [r["state_id"].split(":", 1)[1] for r in states_of(one[1])] == [
        "S:0", "S:1", f"{renamed}:0", f"{renamed}:1", "S:2"]
    same(one, two, workers=2)


@pytest.mark.parametrize("seed", [1, 2])
def test_fixtures_arranged_to_continue_each_other_give_the_same_bytes(fixtures_root: Path, tmp_path: Path,
                                                                      seed: int) -> None:
    # bench/continuing_sessions.py on the shared fixtures: copied, resumed, conflicted and split
    # sessions, every kind at least once.
    rng = random.Random(seed)
    bases = sorted(p for p in fixtures_root.rglob("*.jsonl") if not p.name.startswith("agent-")
                   and "subagents" not in p.parts)
    source = tmp_path / "src"
    for n, base in enumerate(bases):
        arrange(KINDS[(n + seed) % len(KINDS)], base, source / base.relative_to(fixtures_root), source, rng)
    one, two = both(source, tmp_path)
    assert one[0]["skipped_turns"]["duplicate_message_id"] > 50 and one[0]["trace_id_collisions"] > 0
    same(one, two, workers=2)
    same(one, ingest(source, tmp_path / "three", 3), workers=3)


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


def test_other_agents_logs_copied_twice_give_the_same_bytes_on_workers(tmp_path: Path) -> None:
    # Codex, Gemini and Copilot sessions and trajectories (the linear readers claim ids too), each
    # folder twice: the second copy's turns repeat the first's message keys.
    data = Path(__file__).parent / "data"
    source = tmp_path / "src"
    for twice in ("a", "b"):
        for kind in ("agents", "trajectories"):
            shutil.copytree(data / kind, source / twice / kind)
    one, two = both(source, tmp_path)
    assert one[0]["states"] > 20 and one[0]["skipped_turns"]["duplicate_message_id"] > 20
    same(one, two, workers=2)
