"""Issue #34: credentials inside connection strings are redacted whatever their characters.

A property test over random credentials of each kind's real alphabet and length, written as each
format's driver reads them, in every form a session holds them (tests/connection_corpus.py): 1,000 of
each kind in each form through the pass the pipeline runs on every state (`StateRedactor`), and a
sample end to end through `python -m replay.run` and a loopback teacher, every request body and every
file under OUT searched. No piece of a credential (6 characters in a row, as written or decoded) may
survive, and the rest of the string (account, server, database, user) must.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ingestion.schema import Action, ToolCall, TraceState
from ingestion.store import load_states
from replay.run import main
from teachers.redact import redact_text
from teachers.redact_state import StateRedactor
from tests.connection_corpus import FORMS, KINDS, Case, cases, leaked, pieces
from tests.llm_server import LLMServer
from tests.sessions import assistant, tool_result, tool_use, user, write_session
from tests.teacher_script import scripted

PER_PAIR = 1_000   # random credentials of each kind in each form (issue #34's acceptance)
END_TO_END = 4     # of each kind in each form through replay.run: 7 x 9 x 4 = 252 planted credentials

_ARGUMENT = {"Bash": "command", "Write": "content", "Edit": "new_string"}


def _arguments(case: Case) -> dict[str, Any]:
    if case.where == "Bash":
        return {"command": case.text, "description": "run it"}
    if case.where == "Write":
        return {"file_path": "/repo/Program.cs", "content": case.text}
    return {"file_path": "/repo/application.yml", "old_string": "url: x", "new_string": case.text}


def _state(case: Case, n: int) -> TraceState:
    """One state holding the case where a session has it: a user message, a tool result, or the
    arguments of the student's tool call."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    action = Action(content="Done.")
    if case.where == "user":
        messages.append({"role": "user", "content": case.text})
    elif case.where == "tool_result":
        messages += [{"role": "user", "content": "check the configuration"},
                     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                      "function": {"name": "Bash", "arguments": {"command": "cat config"}}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": case.text}]
    else:
        messages.append({"role": "user", "content": "set the connection string"})
        action = Action(tool_calls=[ToolCall(id="c1", name=case.where, arguments=_arguments(case))])
    return TraceState(state_id=f"t{n}:0", trace_id=f"t{n}", turn=0, source="claude_code", messages=messages,
                      student_action=action)


def _redacted_text(case: Case, state: TraceState) -> str:
    if case.where == "user":
        return state.messages[1]["content"]
    if case.where == "tool_result":
        return state.messages[3]["content"]
    return state.student_action.tool_calls[0].arguments[_ARGUMENT[case.where]]


def _faults(case: Case, redacted: str) -> list[str]:
    faults = [f"piece {p!r}" for p in leaked(case, redacted)]
    faults += [f"lost {k!r}" for k in case.keep if k not in redacted]
    return faults + ([] if "[REDACTED:" in redacted else ["nothing redacted"])


def test_every_kind_in_every_form_loses_its_whole_credential_and_only_it() -> None:
    redactor = StateRedactor(b"k")
    planted = cases(PER_PAIR)
    faults: dict[tuple[str, str], list[str]] = {}
    for n, case in enumerate(planted):
        redacted = _redacted_text(case, redactor(_state(case, n)))
        found = _faults(case, redacted)
        if found:
            faults.setdefault((case.kind, case.form), []).append(f"{case.raw!r} -> {redacted!r}: {found}")
    assert len(planted) == PER_PAIR * len(KINDS) * len(FORMS) == 63_000
    assert not faults, {pair: (len(found), found[:2]) for pair, found in faults.items()}
    print(f"{len(planted)} credentials ({PER_PAIR} x {len(KINDS)} kinds x {len(FORMS)} forms): 0 pieces kept")


def test_the_leaks_of_issue_34_are_closed() -> None:
    """What gitleaks' generic-api-key let through: a key starting with `+` or `/` (neither of its value
    classes takes it), a key holding one of its stopwords (`beta`), a password gitleaks' global
    allowlist passes (`(?i)^true|false|null$` finds `false` anywhere)."""
    for key in ("/JmAA2eHEeNLGHCVBbZpCHIQp1q83BVHDQC9ZCAMbblqqI0WaKoD5y8cBcdZ0wcEYGBczcGNVjTDyz2/uM+F3w==",
                "FrwRopxFJxYmsJ9cX8XOaM3+5JsoNNCeMBsQK5MmBetaAgHjPMl879ylmTMjjmv/z+ZrizTSj0f/bc5umACSUg=="):
        redacted, counts = redact_text(f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={key};"
                                       "EndpointSuffix=core.windows.net")
        assert redacted == ("DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=[REDACTED:"
                            "azure-storage-key];EndpointSuffix=core.windows.net") and counts
    redacted, _ = redact_text("Server=db;Database=app;User Id=sa;Password=NotFalse#2024;Encrypt=True")
    assert redacted == "Server=db;Database=app;User Id=sa;Password=[REDACTED:connection-string-password];" \
                       "Encrypt=True"


@pytest.mark.parametrize(("written", "expected"), [
    ('Driver={ODBC Driver 18 for SQL Server};Server=db;Uid=sa;Pwd={p;a}}ss};Encrypt=yes;',
     'Driver={ODBC Driver 18 for SQL Server};Server=db;Uid=sa;Pwd=[REDACTED:connection-string-password];'
     'Encrypt=yes;'),
    ('Data Source=db;User ID=sa;Password="a;b""c";', 'Data Source=db;User ID=sa;Password=[REDACTED:'
                                                     'connection-string-password];'),
    ("Data Source=db;User ID=sa;Password={M=Yaw}/G7bN;", "Data Source=db;User ID=sa;Password=[REDACTED:"
                                                         "connection-string-password];"),
    ("jdbc:sqlserver://db.database.windows.net:1433;database=app;user=sa@db;password={x;y};encrypt=true",
     "jdbc:sqlserver://db.database.windows.net:1433;database=app;user=sa@db;password=[REDACTED:"
     "connection-string-password];encrypt=true"),
    ("jdbc:postgresql://db:5432/app?user=u&password=p%40ss'w0rd&ssl=true",
     "jdbc:postgresql://db:5432/app?user=u&password=[REDACTED:url-query-password]&ssl=true"),
    ("Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
     "SharedAccessKey=+Xq7/abcdEFGH1234ijklMNOP5678qrstUVWX90yz0A=;EntityPath=q",
     "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
     "SharedAccessKey=[REDACTED:azure-shared-access-key];EntityPath=q"),
    ("Password=Tr0ub4dor&3;User ID=sa;Data Source=db",
     "Password=[REDACTED:connection-string-password];User ID=sa;Data Source=db"),
])
def test_only_the_value_goes(written: str, expected: str) -> None:
    assert redact_text(written)[0] == expected


@pytest.mark.parametrize("written", [
    'export DB="Server=db;Database=app;User Id=sa;Password=${DB_PASSWORD};"',
    "Driver={ODBC Driver 18 for SQL Server};Server=db;Uid=sa;Pwd={your_password_here};",
    "Server=(localdb)\\mssqllocaldb;Database=app;Trusted_Connection=True;MultipleActiveResultSets=true",
    "Server=db;Database=app;User Id=sa;Password=;",
    "UseDevelopmentStorage=true",
    "cd src; pwd=$(pwd) make",
    "for (i = 0; password = next(); i++) {}",
    "jdbc:postgresql://db:5432/app?user=u&password=${PGPASSWORD}",
])
def test_references_placeholders_and_look_alikes_stay(written: str) -> None:
    assert redact_text(written) == (written, Counter())


def _session(folder: Path, planted: list[Case], name: str) -> None:
    """A session of turns, one per form group: the user's prose, then one assistant message with a
    tool call per other case (parallel calls, one record each, as Claude Code writes them), then their
    results; a `tool_result` case is the output of its `cat`."""
    records: list[dict[str, Any]] = []
    parent: str | None = None

    def add(record: dict[str, Any]) -> None:
        nonlocal parent
        records.append({**record, "sessionId": name})
        parent = record["uuid"]

    for turn in range(0, len(planted), len(FORMS)):
        group = planted[turn:turn + len(FORMS)]
        calls = []
        for i, case in enumerate(group, turn):
            if case.where == "user":
                add(user(f"{name}-u{i}", parent, case.text))
            elif case.where == "tool_result":
                calls.append((tool_use(f"toolu_{i}", "cat config"), case.text))
            else:
                calls.append(({"type": "tool_use", "id": f"toolu_{i}", "name": case.where,
                               "input": _arguments(case)}, "done"))
        for block, _ in calls:
            add(assistant(f"{name}-a{block['id']}", parent, f"{name}-msg_{turn}", block))
        for block, result in calls:
            add(user(f"{name}-r{block['id']}", parent, tool_result(block["id"], result)))
    add(assistant(f"{name}-last", parent, f"{name}-msg_last", tool_use("toolu_last", "dotnet test")))
    write_session(folder, records, name=name)


def _escaped(value: str) -> str:
    return json.dumps(value)[1:-1]


def test_planted_connection_strings_reach_no_teacher_and_no_file(tmp_path: Path) -> None:
    planted = cases(END_TO_END, seed=3434)
    for kind in KINDS:  # a session per kind, a turn per round of its forms
        by_form = [[c for c in planted if c.kind == kind and c.form == form] for form in FORMS]
        rounds = zip(*by_form, strict=True)
        _session(tmp_path / "sessions", [c for round_ in rounds for c in round_], f"session-{kind}")
    out = tmp_path / "out"
    with LLMServer(scripted) as server:
        assert main(["--source", str(tmp_path / "sessions"), "--out", str(out), "--cache",
                     str(tmp_path / "c.sqlite"), "--teachers", f"ta=openai/ta@{server.url}"]) == 0
        sent = json.dumps(server.requests)
    report = json.loads((out / "report.json").read_text())
    assert report["states"] == len(server.requests) == len(KINDS) * (END_TO_END + 1)
    files = {p: p.read_bytes().decode("utf-8", "replace") for p in out.rglob("*") if p.is_file()}
    assert any(p.suffix == ".arrow" for p in files) and (out / "pairs.jsonl").exists()
    # A piece the text around any credential holds anyway proves nothing.
    around = "\n".join(part for c in planted for part in (c.before, c.after))
    around += "\n" + _escaped(around)
    leaks = []
    for case in planted:
        for piece in pieces(case.secret) | pieces(case.raw):
            if piece in around or _escaped(piece) in around:
                continue
            where = ["request"] if _escaped(piece) in sent else []
            where += [p.name for p, body in files.items() if piece in body or _escaped(piece) in body]
            if where:
                leaks.append((case.kind, case.form, piece, where))
    assert leaks == []
    states = "\n".join(state.model_dump_json() for state in load_states(out))
    lost = [(c.kind, k) for c in planted for k in c.keep if k not in states]
    assert lost == []
    assert sum(report["redactions"].values()) >= len(planted)
    print(f"{len(planted)} credentials, {len(server.requests)} requests, {len(files)} files: 0 pieces")
