"""--project / --exclude-project / --since / --until (issue #50): sessions made for each filter, and bad
values (one line and exit 2, or a warning where a user would go on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingestion.store import load_states
from replay.run import main
from tests.sessions import assistant, text, tool_result, tool_use, user, with_session, write_session


def _session(session_id: str, cwd: str, days: list[int]) -> list[dict[str, Any]]:
    """One session, one Bash turn per day of July 2025 (noon UTC), each answered by its result."""
    records: list[dict[str, Any]] = []
    parent = None
    for n, day in enumerate(days):
        ts = f"2025-07-{day:02d}T12:00:00.000Z"
        records.append(user(f"u{n}", parent, f"task for day {day}", ts=ts) if n == 0 else
                       user(f"r{n}", parent, tool_result(f"c{n - 1}", f"output {n - 1}"), ts=ts))
        records.append(assistant(f"a{n}", records[-1]["uuid"], f"m{n}", tool_use(f"c{n}", f"echo day {day}"),
                                 ts=ts))
        parent = f"a{n}"
    records.append(user("last", parent, tool_result(f"c{len(days) - 1}", "done")))
    records.append(assistant("end", "last", "mend", text("finished")))
    return with_session(records, session_id, msg_tag=session_id[:4], cwd=cwd)


@pytest.fixture
def projects(tmp_path: Path) -> Path:
    """Two projects: `-Users-alex-work-clientx` whose sessions recorded another cwd (/Users/alex/other/tool:
    folder name and cwd disagree), and `-Users-alex-work-app` (cwd /Users/alex/work/app)."""
    root = tmp_path / "projects"
    write_session(root / "-Users-alex-work-clientx", _session("aaaa1111-0000-0000-0000-000000000000",
                                                               "/Users/alex/other/tool", [1, 2, 3]), name="a")
    write_session(root / "-Users-alex-work-app", _session("bbbb2222-0000-0000-0000-000000000000",
                                                           "/Users/alex/work/app", [2]), name="b")
    return root


def _run(projects: Path, out: Path, *flags: str) -> tuple[int, dict[str, Any], list[Any]]:
    code = main(["--source", str(projects), "--out", str(out), "--dry-run", *flags])
    if code != 0 or not (out / "report.json").exists():
        return code, {}, []
    return code, json.loads((out / "report.json").read_text()), list(load_states(out))


def _traces(states: list[Any]) -> set[str]:
    return {s.trace_id[:4] for s in states}


def test_without_filters_every_state_is_read(projects: Path, tmp_path: Path) -> None:
    code, report, states = _run(projects, tmp_path / "out")
    assert code == 0 and report["states"] == 6 and report["filtered"] == {}
    assert _traces(states) == {"aaaa", "bbbb"}


@pytest.mark.parametrize(("flags", "kept", "filtered"), [
    (["--project", "*clientx*"], {"aaaa"}, {"project": 2}),          # the folder's name
    (["--project", "tool"], {"aaaa"}, {"project": 2}),               # the recorded cwd's last part
    (["--project", "/Users/alex/work/*"], {"bbbb"}, {"project": 4}),  # the recorded cwd, whole
    (["--project", "tool", "--project", "app"], {"aaaa", "bbbb"}, {}),
    (["--exclude-project", "*clientx*"], {"bbbb"}, {"exclude_project": 4}),
    (["--exclude-project", "/Users/alex/other/*"], {"bbbb"}, {"exclude_project": 4}),
    (["--project", "*", "--exclude-project", "app"], {"aaaa"}, {"exclude_project": 2}),
])
def test_project_filters_hear_folder_and_cwd(projects: Path, tmp_path: Path, flags: list[str],
                                            kept: set[str], filtered: dict[str, int]) -> None:
    code, report, states = _run(projects, tmp_path / "out", *flags)
    assert code == 0
    assert _traces(states) == kept
    assert report["filtered"] == filtered
    assert report["states"] == len(states) == 6 - sum(filtered.values())
    sent = [json.loads(line) for line in (tmp_path / "out" / "sent.jsonl").read_text().splitlines()]
    assert sent[0]["record"] == "settings" and sent[0]["filtered"] == filtered


def test_since_keeps_the_later_turns_of_a_session_across_the_bound(projects: Path, tmp_path: Path) -> None:
    code, report, states = _run(projects, tmp_path / "out", "--since", "2025-07-02T00:00:00Z")
    assert code == 0
    assert report["filtered"] == {"since": 1}
    clientx = [s for s in states if s.trace_id.startswith("aaaa")]
    # The turns of day 2 and 3 (and the closing turn) stay; day 1's turn is context only.
    assert [s.turn for s in clientx] == [1, 2, 3]
    history = json.dumps(clientx[0].messages)
    assert "task for day 1" in history and "echo day 1" in history


def test_until_with_a_date_includes_that_day(projects: Path, tmp_path: Path) -> None:
    code, report, states = _run(projects, tmp_path / "out", "--until", "2025-07-02")
    assert code == 0
    # turns of 1 and 2 July; the closing turns (17 November) and day 3's are after the bound. Local
    # midnight can be a few hours either side of UTC noon, so day 2's turn is in whatever the zone.
    assert sorted((s.trace_id[:4], s.turn) for s in states) == [("aaaa", 0), ("aaaa", 1), ("bbbb", 0)]
    assert report["filtered"] == {"until": 3}


def test_since_as_a_duration_back_from_now(projects: Path, tmp_path: Path) -> None:
    code, report, _ = _run(projects, tmp_path / "out", "--since", "7d")  # every turn is older
    assert code == 0 and report["states"] == 0 and report["filtered"] == {"since": 6}


@pytest.mark.parametrize(("flags", "said"), [
    (["--since", "last tuesday"], "--since: 'last tuesday' is neither a date"),
    (["--until", "2025-13-45"], "--until: '2025-13-45' is neither a date"),
    (["--since", "2025-07-03", "--until", "2025-07-01"], "is not before --until"),
    (["--project", "nothing-like-it"], "--project 'nothing-like-it' matches no project of the 6 states read"),
])
def test_bad_values_are_one_line_and_exit_2(projects: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str], flags: list[str],
                                            said: str) -> None:
    out = tmp_path / "out"
    assert _run(projects, out)[0] == 0   # an earlier run's files, which a failed run must leave as they were
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    try:   # argparse's errors exit, the run's return
        code = main(["--source", str(projects), "--out", str(out), "--dry-run", *flags])
    except SystemExit as exited:
        code = exited.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and said in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_a_glob_that_matches_nothing_beside_others_or_an_exclusion_is_a_warning(
        projects: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, states = _run(projects, tmp_path / "out", "--project", "app", "--project", "typo*",
                                "--exclude-project", "old-client")
    assert code == 0 and _traces(states) == {"bbbb"}
    err = capsys.readouterr().err
    assert "warning: --project 'typo*' matches no project" in err
    assert "warning: --exclude-project 'old-client' matches no project" in err
    assert len(report["extra"]["scope"]["warnings"]) == 2
