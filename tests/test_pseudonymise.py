"""Pseudonymisation (issue #50): personal data to stable placeholders before anything leaves the process,
in the requests a loopback teacher receives and in every file under OUT; `--no-pseudonymise` keeps it."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ingestion.store import load_states
from replay.run import main
from teachers.pseudonyms import Pseudonyms, _bare, _bare_only, _splice, pseudonymise_found
from tests.llm_server import LLMServer
from tests.teacher_script import scripted

NAMES = Pseudonyms(b"k", ("alex", "mark", "ubuntu"))


@pytest.mark.parametrize(("text", "gone", "kept"), [
    ("cd /Users/alex/src", "alex", "/Users/user-"),
    ("ls /home/ubuntu/app", "ubuntu", "/home/user-"),          # a system account: in its home path...
    ("apt on ubuntu 22.04", "", "ubuntu 22.04"),               # ...not as a word of the text
    ("C:\\Users\\alex\\code", "alex", "C:\\Users\\user-"),
    ('{"p": "C:\\\\Users\\\\alex\\\\x"}', "alex", "Users\\\\user-"),
    ("~/.claude/projects/-Users-alex-work-app/s.jsonl", "alex", "-Users-user-"),
    ("/mnt/c/Users/alex/x and file:///Users/alex/y", "alex", "file:///Users/user-"),
    ("/home/USER/projects and /Users/Shared/x", "", "/home/USER/projects and /Users/Shared/x"),
    ("GET https://site.example/home/about", "", "/home/about"),   # a URL's path is no home
    ("alex wrote it; see @alex", "alex", "user-"),
    ("Alexandra and alexa", "", "Alexandra and alexa"),
    ("mark as done", "", "mark as done"),                       # a name that is a word, as a word
    ("Mark said so", "Mark", "user-"),                           # ... and as a name
    ("mail jesse@fsck.com now", "jesse@fsck.com", "@example.com now"),
    ("Co-Authored-By: Claude <noreply@anthropic.com>", "", "noreply@anthropic.com"),
    # the name of a personal address is personal too: git log's Author lines, a quoted display name
    ("Author: logan <1363+loganf27@users.noreply.github.com>", "logan", "Author: person-"),
    ('commit 1a2b\\nAuthor: Logan Finney <lf@corp.io>\\nDate', "Logan", "\\nAuthor: person-"),
    ('To: "Bo Li" <bo.li@corp.io>', "Bo Li", 'To: "person-'),
    ("a = x<lf@corp.io>", "lf@corp.io", "a = x<email-"),
    ("git clone git@github.com:acme/app.git", "", "git@github.com"),
    ("systemctl restart getty@tty1.service; icon@2x.png", "", "getty@tty1.service; icon@2x.png"),
    ("136375980+alex@users.noreply.github.com", "noreply.github", "email-"),
    ("you@example.com", "", "you@example.com"),
    ("ssh root@93.184.216.34", "93.184.216.34", "ip-"),
    ("Network: http://72.62.132.43:5173/", "72.62.132.43", "http://ip-"),
    ("10.0.0.1 127.0.0.1 192.168.1.10 8.8.8.8 0.99.49.3", "", "127.0.0.1 192.168.1.10 8.8.8.8 0.99.49.3"),
    ("LEVELSET (Version 3.2.6.1)", "", "Version 3.2.6.1"),
    ("route 143.166.0.0/16", "", "143.166.0.0/16"),
    ("ping nas.local", "nas.local", "ping host-"),
    ("edit .claude/settings.local.json and .env.local", "", "settings.local.json and .env.local"),
    ("alex@Alexs-MacBook-Pro ~ %", "Alexs-MacBook", "host-"),
    ("DESKTOP-4F2K9QZ\\alex", "DESKTOP-4F2K9QZ", "host-"),
    ("call +44 20 7946 0958", "7946", "call phone-"),
    ("x = a +1 2", "", "x = a +1 2"),
])
def test_pseudonymise_found(text: str, gone: str, kept: str) -> None:
    out, found = pseudonymise_found(text, NAMES)
    assert kept in out
    if gone:
        assert gone not in out and found
    else:
        assert out == text and not found
    assert pseudonymise_found(out, NAMES)[0] == out   # placeholders are left as they are


def test_placeholders_are_stable_and_keyed() -> None:
    one, _ = pseudonymise_found("/Users/alex/a alex@x.io", NAMES)
    two, _ = pseudonymise_found("Alex in /home/alex", NAMES)
    tag = re.search(r"user-([0-9a-f]{6})", one)[1]   # type: ignore[index]
    assert two.count(f"user-{tag}") == 2                             # the same name, the same placeholder
    other, _ = pseudonymise_found("/Users/alex/a", Pseudonyms(b"another key", ("alex",)))
    assert tag not in other                                          # and keyed: another key, another tag


PERSONAL = [rb"/Users/dain\b", rb"-Users-dain-", rb"(?<![\w-])dain(?![\w-])", rb"/home/marco\b",
            rb"(?<![\w-])cboos(?![\w-])", rb"jesse@fsck\.com"]


def _found(data: bytes) -> list[str]:
    return [p.decode() for p in PERSONAL if re.search(p, data)]


def _run(fixtures_root: Path, tmp_path: Path, *flags: str) -> tuple[Path, bytes]:
    out = tmp_path / "out"
    with LLMServer(scripted) as server:
        assert main(["--source", str(fixtures_root), "--out", str(out), "--cache", str(tmp_path / "c.sqlite"),
                     "--teachers", f"ta=openai/ta@{server.url}", *flags]) == 0
        return out, json.dumps(server.requests).encode()


def test_no_name_or_address_reaches_the_teacher_or_a_file(fixtures_root: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAY_REDACT_KEY", "test-key")
    out, sent = _run(fixtures_root, tmp_path, "--view")
    assert _found(sent) == []
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".arrow" for p in files) and (out / "sent.jsonl") in files
    assert [(str(p.relative_to(out)), hit) for p in files for hit in _found(p.read_bytes())] == []
    report = json.loads((out / "report.json").read_text())
    assert report["pseudonymised"]["user_name"] >= 7 and report["pseudonymised"]["email"] >= 1
    # The student's actions and the prompts name the user with the same placeholder.
    dain = f"user-{Pseudonyms(b'test-key').tag('user_name', 'dain')}"
    states = list(load_states(out))
    assert any(dain in json.dumps(s.student_action.model_dump()) for s in states)
    assert dain.encode() in sent
    # sent.jsonl: the teacher was sent every state, of every session
    rows = [json.loads(line) for line in (out / "sent.jsonl").read_text().splitlines()]
    assert rows[0]["pseudonymise"] is True and rows[0]["pseudonymised"] == report["pseudonymised"]
    assert rows[1]["teacher"] == "ta" and rows[1]["states_sent"] == report["states"] == len(states)
    assert set(rows[1]["sessions"]) == {s.trace_id for s in states}
    assert "sent.jsonl" in (out / "view" / "index.html").read_text()
    assert "pseudonymisation**: on" in (out / "README.md").read_text()


def test_no_pseudonymise_keeps_them(fixtures_root: Path, tmp_path: Path) -> None:
    out, sent = _run(fixtures_root, tmp_path, "--no-pseudonymise", "--max-states", "40")
    assert _found(sent) != []
    assert json.loads((out / "report.json").read_text())["pseudonymised"] == {}
    assert "pseudonymisation**: OFF" in (out / "README.md").read_text()


# --- #55: the fast paths give what the spans gave ---------------------------------------------------

_PIECES = ["alex", "Alex", "ALEX", "alexis", "bo.li", "bo-li", "ken", "Ken", "token", "kenny", "data",
           "base", "database", " ", "\n", "\\n", ".", "-", "_", "/", "@", "'", '"', "(", ")", "é", "名", "1",
           "x", ":"]
_RANDOM_NAMES = Pseudonyms(b"k", ("alex", "alexis", "bo.li", "bo-li", "ken", "base"))


def _texts(count: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(_PIECES) for _ in range(rnd.randint(1, 24))) for _ in range(count)]


def test_bare_names_alone_come_out_as_their_spans_would() -> None:
    """Where bare names are all a text holds, one substitution per form (`_bare_only`) writes what the
    spans and `_splice` write, and finds the same values."""
    settings = _RANDOM_NAMES
    checked = 0
    for text in _texts(20_000, 55):
        forms = settings.hints(text) & settings._bare_set   # type: ignore[attr-defined]
        if not forms:
            continue
        spans_found: list[tuple[str, str]] = []
        expected = _splice(text, _bare(text, settings, forms), settings, spans_found) if _bare(
            text, settings, forms) else text
        found: list[tuple[str, str]] = []
        assert _bare_only(text, settings, forms, found) == expected, text
        assert set(found) == set(spans_found), text
        checked += 1
    assert checked > 5_000


def test_a_bare_name_hint_is_never_narrower_than_the_name() -> None:
    """Every name `_bare` takes (looking for every form, hints or not) is among the text's hints; a name
    inside a word is no hint."""
    settings = _RANDOM_NAMES
    every = set(settings._bare_forms)   # type: ignore[attr-defined]
    for text in _texts(20_000, 56):
        taken = {form for _, _, _, form in _bare(text, settings, every)}
        assert taken <= settings.hints(text), text
    assert settings.hints("a token and a database") == set()
    assert settings.hints("ken, Base.") == {"ken", "Base"}


def test_the_run_reads_the_heads_in_a_forked_process(fixtures_root: Path) -> None:
    """The settings made while the heads are read in a child process are those read here: the same
    names, the one object of those settings in the process (what worker processes unpickle). In a
    process of its own: one with no other thread, as a run's is (pytest's workers run threads)."""
    script = (
        "import os, sys, threading\n"
        "from ingestion.sources import find_files\n"
        "from replay.ingest.pseudonyms import run_pseudonyms, start_run_pseudonyms\n"
        "files = find_files(__import__('pathlib').Path(sys.argv[1]))\n"
        "forks = []\n"
        "fork = os.fork\n"
        "os.fork = lambda: forks.append(1) or fork()\n"
        "forked = start_run_pseudonyms(files, b'k', True)()\n"
        "here = run_pseudonyms(files, b'k', True)\n"
        "stop = threading.Event(); other = threading.Thread(target=stop.wait); other.start()\n"
        "threaded = start_run_pseudonyms(files, b'k', True)()\n"
        "stop.set(); other.join()\n"
        "print(len(forks), forked is here, threaded is here, 'dain' in here.names)\n")
    done = subprocess.run([sys.executable, "-c", script, str(fixtures_root)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], check=False)
    assert done.stdout.split() == ["1", "True", "True", "True"], done.stderr[-2000:]
