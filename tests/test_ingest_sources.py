"""What a source holds: trace ids from sessionIds, unreadable entries, gzip streams, byte-order marks."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestion.options import IngestOptions
from ingestion.schema import SourceError
from ingestion.sources import find_files, iter_states
from ingestion.stats import IngestStats
from replay.run import main as run_main
from tests.sessions import (
    SESSION,
    assistant,
    basic_session,
    lines_of,
    text,
    user,
    with_session,
    write_session,
)

OTHER = "99999999-8888-7777-6666-555555555555"
NOBODY = 65534


def ingest(source: Path, **options: Any) -> tuple[list, IngestStats]:
    stats = IngestStats()
    return list(iter_states(source, IngestOptions(**options), stats)), stats


def ids(states: list) -> list[str]:
    return [s.state_id for s in states]


# --- trace ids ------------------------------------------------------------------------------------

def test_same_file_name_different_sessions_give_distinct_ids(tmp_path: Path) -> None:
    # Hooks export sessions as transcript.jsonl: the name says nothing, the sessionId does.
    write_session(tmp_path / "a", basic_session(), name="transcript")
    write_session(tmp_path / "b", with_session(basic_session(), OTHER, msg_tag="_b"), name="transcript")
    states, _ = ingest(tmp_path)
    assert ids(states) == [f"claude_code:{SESSION}:0", f"claude_code:{SESSION}:1",
                           f"claude_code:{OTHER}:0", f"claude_code:{OTHER}:1"]
    assert {s.trace_id for s in states} == {s.metadata["session_id"] for s in states} == {SESSION, OTHER}


def test_the_file_name_does_not_change_ids(tmp_path: Path) -> None:
    first, _ = ingest(write_session(tmp_path / "a", basic_session(), name="transcript"))
    second, _ = ingest(write_session(tmp_path / "b", basic_session(), name="renamed-export"))
    assert ids(first) == ids(second) == [f"claude_code:{SESSION}:0", f"claude_code:{SESSION}:1"]


def test_a_file_without_session_ids_is_named_by_its_path(tmp_path: Path) -> None:
    one = write_session(tmp_path / "a", with_session(basic_session(), None), name="transcript")
    two = write_session(tmp_path / "b", with_session(basic_session(), None, msg_tag="_b"), name="transcript")
    again, _ = ingest(one)
    states, _ = ingest(tmp_path)
    assert len(set(ids(states))) == 4 and all(s.trace_id.startswith("file-") for s in states)
    assert ids(again) == ids(states)[:2]                     # stable across runs
    assert states[0].trace_id != states[2].trace_id and str(two) in states[2].metadata["file"]


def resumed(new_session: str | None) -> list[dict]:
    """A resumed session's file: the old session's lines copied (keeping their sessionId, as older
    CLIs did), then new turns under the new sessionId."""
    new = [user("u3", "a2", "and the tests?", sessionId=new_session or SESSION),
           assistant("a3", "u3", "msg_3", text("None yet."), sessionId=new_session or SESSION)]
    return basic_session() + new


def test_resumed_copies_keep_their_ids_whichever_files_are_read(tmp_path: Path) -> None:
    original = write_session(tmp_path / "p", basic_session(), name=SESSION)
    copy = write_session(tmp_path / "p", resumed(OTHER), name=OTHER)
    alone, _ = ingest(copy)
    both, stats = ingest(tmp_path / "p")
    first, _ = ingest(original)
    expected = [f"claude_code:{SESSION}:0", f"claude_code:{SESSION}:1", f"claude_code:{OTHER}:0"]
    assert ids(alone) == ids(both) == expected
    assert ids(first) == expected[:2]
    assert stats.skipped_turns["duplicate_message_id"] == 2   # the copies, read after the original


def diverged() -> list[dict]:
    """The same session restored from a backup on another machine: its first turn copied, then turns
    of its own (new message ids) under the same sessionId."""
    return basic_session()[:3] + [assistant("b2", "u2", "msg_2_other", text("Two files: a.py, b.py.")),
                                  user("b3", "b2", "and the tests?"),
                                  assistant("b4", "b3", "msg_3_other", text("None yet."))]


def test_a_trace_id_taken_by_other_content_gets_a_stable_distinct_one(tmp_path: Path) -> None:
    write_session(tmp_path / "machine-a", basic_session(), name=SESSION)
    write_session(tmp_path / "machine-b", diverged(), name=SESSION)
    write_session(tmp_path / "machine-c", basic_session(), name=SESSION)   # a verbatim copy: no state
    write_session(tmp_path / "machine-d", with_session(basic_session(), SESSION, msg_tag="_d"), name=SESSION)
    states, stats = ingest(tmp_path)
    assert len(states) == 2 + 2 + 2 and len(set(ids(states))) == len(states)
    assert ids(states)[:2] == [f"claude_code:{SESSION}:0", f"claude_code:{SESSION}:1"]
    renamed = states[2:]
    assert all(s.trace_id.startswith(SESSION + "~") and s.metadata["session_id"] == SESSION for s in renamed)
    assert [s.turn for s in renamed] == [1, 2, 0, 1]      # turns keep their numbers within the trace
    assert renamed[0].trace_id == renamed[1].trace_id != renamed[2].trace_id == renamed[3].trace_id
    assert stats.trace_id_collisions == 2 and stats.skipped_turns["duplicate_message_id"] == 2 + 1
    # The later trace's history is its own: the restored file's turn 2 follows its own turn 1.
    assert renamed[1].messages[-2]["content"] == "Two files: a.py, b.py."
    again, _ = ingest(tmp_path)
    assert ids(again) == ids(states)                          # the same ids on every run


def test_distinct_ids_do_not_depend_on_the_order_files_were_written(tmp_path: Path) -> None:
    for name, records in (("b", diverged()), ("a", basic_session())):
        write_session(tmp_path / "one" / name, records, name=SESSION)
    for name, records in (("a", basic_session()), ("b", diverged())):
        write_session(tmp_path / "two" / name, records, name=SESSION)
    one, _ = ingest(tmp_path / "one")
    two, _ = ingest(tmp_path / "two")
    assert ids(one) == ids(two) and len(set(ids(one))) == 4


def test_resumed_sessions_are_no_collision(tmp_path: Path) -> None:
    # A resumed file that copies the history under the old sessionId and goes on: its new turns
    # take the next numbers, and nothing is renamed.
    write_session(tmp_path / "p", basic_session(), name=SESSION)
    write_session(tmp_path / "p", resumed(None), name=OTHER)
    states, stats = ingest(tmp_path / "p")
    assert ids(states) == [f"claude_code:{SESSION}:{n}" for n in range(3)]
    assert stats.trace_id_collisions == 0


def test_report_counts_trace_id_collisions(tmp_path: Path) -> None:
    write_session(tmp_path / "src" / "a", basic_session(), name=SESSION)
    write_session(tmp_path / "src" / "b", diverged(), name=SESSION)
    assert run_main(["--source", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--dry-run",
                     "--teachers", "gpt-5"]) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["trace_id_collisions"] == 1 and report["states"] == 4


# --- unreadable entries ---------------------------------------------------------------------------

@pytest.fixture()
def shared_dir() -> Iterator[Path]:
    """A folder an unprivileged user can reach (pytest's tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="replay-perm-"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(folder)


def without_privileges(run: Callable[[], Any]) -> Any:
    """`run()` as a user that file permissions apply to: tests often run as root, who reads anything.
    Forked, so the interpreter (and every module already imported) stays; the result comes back as JSON."""
    if os.geteuid() != 0:
        return run()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # pragma: no cover - the child
        code = 1
        try:
            os.close(read)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with os.fdopen(write, "w") as out:
                json.dump(run(), out)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as source:
        data = source.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, data
    return json.loads(data)


def test_unreadable_files_and_folders_are_counted_skips(shared_dir: Path) -> None:
    projects = shared_dir / "projects"
    write_session(projects / "good", basic_session())
    locked = write_session(projects / "locked-file", with_session(basic_session(), OTHER, msg_tag="_l"),
                           name=OTHER)
    locked.chmod(0o000)
    hidden = projects / "locked-folder"
    write_session(hidden, with_session(basic_session(), "hidden", msg_tag="_h"), name="hidden")
    hidden.chmod(0o000)
    ingest(projects)   # every module the child needs is imported before it drops privileges

    def run() -> dict:
        states, stats = ingest(projects)
        return {"ids": ids(states), "files": stats.files, "skipped": dict(stats.skipped_files),
                "problems": stats.problems}

    result = without_privileges(run)
    assert result["ids"] == [f"claude_code:{SESSION}:0", f"claude_code:{SESSION}:1"]
    assert result["skipped"] == {"unreadable_file": 1, "unreadable_folder": 1}
    assert result["files"] == 2
    by_reason = {p["reason"]: p for p in result["problems"]}
    assert by_reason["unreadable_file"]["file"] == str(locked)
    assert by_reason["unreadable_folder"]["file"] == str(hidden)
    assert by_reason["unreadable_file"]["detail"] == "Permission denied"


def test_an_unreadable_source_is_one_line(shared_dir: Path) -> None:
    (shared_dir / "projects").mkdir()
    (shared_dir / "projects").chmod(0o000)

    def run() -> str:
        try:
            find_files(shared_dir / "projects")
        except SourceError as error:
            return str(error)
        return "no error"

    assert without_privileges(run) == f"--source {shared_dir / 'projects'}: Permission denied"


def test_fifos_and_broken_links_never_stop_a_run(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    write_session(projects / "p", basic_session())
    os.mkfifo(projects / "p" / "pipe.jsonl")             # opening it would block the run forever
    (projects / "p" / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    (projects / "loop").symlink_to(projects)              # a folder link back up the tree
    out = tmp_path / "out"
    assert run_main(["--source", str(projects), "--out", str(out), "--dry-run"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["states"] == 2 and report["files"] == 3
    assert report["skipped_files"] == {"missing_file": 1, "not_a_regular_file": 1}
    fifo = next(p for p in report["problems"] if p["reason"] == "not_a_regular_file")
    assert fifo["file"].endswith("pipe.jsonl") and fifo["detail"] == "a FIFO"


def test_a_file_reached_by_several_paths_is_listed_once(tmp_path: Path) -> None:
    """A file reached through a link to it, a link to its folder, or a root given twice is one file;
    a copy is another file (its resumed turns are settled when read)."""
    projects = tmp_path / "projects"
    session = write_session(projects / "p", basic_session())
    (projects / "alias").symlink_to(projects / "p")                       # a folder link inside the tree
    (projects / "q").mkdir()
    (projects / "q" / "linked.jsonl").symlink_to(session)
    os.link(session, projects / "q" / "hard.jsonl")
    shutil.copy(session, projects / "q" / "copy.jsonl")
    files = find_files([projects, projects / "p"])
    assert files == [projects / "p" / session.name, projects / "q" / "copy.jsonl"]


# --- gzip -----------------------------------------------------------------------------------------

def test_gzipped_sessions_read_like_plain_ones(tmp_path: Path) -> None:
    plain, _ = ingest(write_session(tmp_path / "plain", basic_session()))
    states, stats = ingest(write_session(tmp_path / "gz", basic_session(), gz=True))
    assert [s.model_dump(exclude={"metadata"}) for s in states] == \
        [s.model_dump(exclude={"metadata"}) for s in plain]
    assert stats.files == 1 and stats.lines == 4 and not stats.problems
    assert states[0].metadata["file"].endswith(".jsonl.gz")


def test_a_cut_gzip_stream_keeps_what_came_before(tmp_path: Path) -> None:
    records = basic_session() + [user("u3", "a2", "x" * 200_000), assistant("a3", "u3", "msg_3", text("ok"))]
    whole = gzip.compress(lines_of(records))
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / f"{SESSION}.jsonl.gz").write_bytes(whole[: len(whole) - 40])
    (folder / f"{OTHER}.jsonl.gz").write_bytes(b"not gzip at all\n")
    out = tmp_path / "out"
    assert run_main(["--source", str(folder), "--out", str(out), "--dry-run"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["files"] == 2 and report["states"] == 2
    assert report["skipped_lines"] == {"bad_gzip": 1, "truncated_gzip": 1}
    cut = next(p for p in report["problems"] if p["reason"] == "truncated_gzip")
    assert cut["line"] == 6 and cut["file"].endswith(f"{SESSION}.jsonl.gz")


# --- byte-order marks -----------------------------------------------------------------------------

def test_a_byte_order_mark_is_dropped_silently(tmp_path: Path) -> None:
    data = lines_of(basic_session())
    session = tmp_path / "p" / f"{SESSION}.jsonl"
    session.parent.mkdir()
    session.write_bytes(b"\xef\xbb\xbf" + data)
    states, stats = ingest(session)
    plain, _ = ingest(write_session(tmp_path / "q", basic_session()))
    assert ids(states) == ids(plain) and len(states) == 2
    assert not stats.problems and not stats.skipped_lines and not stats.repaired_lines
