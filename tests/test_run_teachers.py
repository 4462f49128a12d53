"""`replay.run` with teachers, end to end against loopback OpenAI-compatible servers."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replay.run import main
from tests.llm_server import LLMServer, Reply, chat_completion
from tests.sessions import assistant, text, tool_use, user, write_session
from tests.teacher_script import request_key, scripted

ROOT = Path(__file__).resolve().parents[1]


def pool(url: str, *names: str) -> str:
    return ",".join(f"{n}=openai/{n}@{url}" for n in names)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def comparable(proposals: list[dict]) -> list[dict]:
    return [{k: v for k, v in p.items() if k != "cached"} for p in proposals]


def run_cli(source: Path, out: Path, teachers: str, *extra: str) -> dict:
    assert main(["--source", str(source), "--out", str(out), "--teachers", teachers,
                 "--cache", str(out.parent / "cache.sqlite"), *extra]) == 0
    return json.loads((out / "report.json").read_text())


def test_second_run_is_served_from_the_cache(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob("fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"))
    with LLMServer(scripted) as server:
        teachers = pool(server.url, "ta", "tb")
        first = run_cli(session, tmp_path / "one", teachers)
        seen = len(server.requests)
        second = run_cli(session, tmp_path / "two", teachers)
        assert len(server.requests) == seen == 2 * first["states"]  # the second run asked nothing
    assert first["teacher_calls"]["made"] == seen and second["teacher_calls"]["made"] == 0
    assert second["teacher_calls"]["cached"] == seen
    assert comparable(read_jsonl(tmp_path / "one" / "proposals.jsonl")) == comparable(
        read_jsonl(tmp_path / "two" / "proposals.jsonl"))


def _serve_in_subprocess(port_file: Path, log: Path, delay: float) -> subprocess.Popen:
    code = f"""
import json, sys, time
sys.path.insert(0, {str(ROOT)!r})
from tests.llm_server import LLMServer, Reply, chat_completion
from tests.teacher_script import request_key, scripted
log = open({str(log)!r}, "a", buffering=1)
def respond(body):
    log.write(request_key(body) + "\\n")  # on arrival: a request in flight at the kill is logged then
    time.sleep({delay})
    return scripted(body)
with LLMServer(respond) as server:
    open({str(port_file)!r}, "w").write(server.url)
    while True:
        time.sleep(1)
"""
    process = subprocess.Popen([sys.executable, "-c", code])
    for _ in range(100):
        if port_file.exists() and port_file.read_text():
            return process
        time.sleep(0.05)
    raise RuntimeError("server did not start")


def test_kill_9_then_rerun_asks_nothing_twice(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob("cb2e607c-c758-415a-8b45-c49e4631906a.jsonl"))  # 80 states
    log = tmp_path / "requests.log"
    server = _serve_in_subprocess(tmp_path / "url", log, delay=0.02)
    try:
        url = (tmp_path / "url").read_text()
        teachers = pool(url, "ta", "tb", "tc")
        cache = tmp_path / "cache.sqlite"
        args = [sys.executable, "-m", "replay.run", "--source", str(session), "--teachers", teachers,
                "--cache", str(cache), "--concurrency", "4"]
        victim = subprocess.Popen([*args, "--out", str(tmp_path / "killed")], cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while (not log.exists() or len(log.read_text().splitlines()) < 60) and time.time() < deadline:
            time.sleep(0.05)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        first = log.read_text().splitlines()
        stored = sqlite3.connect(cache).execute("select count(*) from responses").fetchone()[0]
        assert 0 < stored <= len(first) < 240
        log.write_text("")
        subprocess.run([*args, "--out", str(tmp_path / "resumed")], cwd=ROOT, check=True,
                       capture_output=True)
        second = log.read_text().splitlines()
    finally:
        server.kill()
    # Everything answered and stored before the kill is never asked again: only the calls that
    # were in flight (requested, not yet stored) may repeat. (A transport retry may log one key twice.)
    # With the proposals equal to a clean run's below, this leaves no room for a stored key in `second`.
    assert len(set(first) | set(second)) == 240
    assert len(set(second)) == 240 - stored
    assert len(set(first) & set(second)) <= len(first) - stored
    with LLMServer(scripted) as fresh:
        run_cli(session, tmp_path / "clean" / "out", pool(fresh.url, "ta", "tb", "tc"))
    clean = comparable(read_jsonl(tmp_path / "clean" / "out" / "proposals.jsonl"))
    resumed = comparable(read_jsonl(tmp_path / "resumed" / "proposals.jsonl"))
    strip = lambda ps: [{k: v for k, v in p.items() if k != "model"} for p in ps]  # noqa: E731
    assert strip(resumed) == strip(clean)


def test_same_family_teacher_is_never_asked(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob("d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl"))  # claude-opus-4-6
    with LLMServer(scripted) as server:
        teachers = f"{pool(server.url, 'gpt-4o')},sonnet=openai/claude-sonnet-4-5@{server.url}"
        report = run_cli(session, tmp_path / "default", teachers)
        assert {r["model"] for r in server.requests} == {"gpt-4o"}
        assert report["excluded_same_family"] == {"sonnet": report["states"]}
        server.requests.clear()
        run_cli(session, tmp_path / "allowed", teachers, "--allow-same-family")
        assert {r["model"] for r in server.requests} == {"claude-sonnet-4-5"}  # gpt-4o: cached


def test_all_teachers_excluded_is_counted(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob("d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl"))
    with LLMServer(scripted) as server:
        report = run_cli(session, tmp_path / "out", f"opus=openai/claude-opus-4@{server.url}")
        assert server.requests == []
    assert report["states_all_teachers_excluded"] == report["states"] == 4
    assert report["pairs"] == 0


PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9vQm0c2Ffz0lqk7R0hC1q3wTq0b8x\n"
       "Zk3mF0Yk1m9t6L1Qb0s3p2Q8n9u4k5j6h7g8f9d0s1a2q3w4e5r6t7y8\n-----END RSA PRIVATE KEY-----")
SECRETS = ["sk-proj-4f9aQ2x7Lm8Nc3Vb6Zt1Yr5Ws0Pk9Jh2", "AKIAQ7KZ3M2XWPLN4RTY",
           "wJalrXUtnFEMI/K7MDENG/bPxRfiCYq8Zr2Lk9Xw", "MIIEowIBAAKCAQEA7bq9vQm0c2Ffz0lqk7R0hC1q3wTq0b8x"]


def planted_session(folder: Path) -> Path:
    env = f"DEBUG=1\nAWS_ACCESS_KEY_ID={SECRETS[1]}\nAWS_SECRET_ACCESS_KEY={SECRETS[2]}\n"
    records = [
        user("u1", None, "deploy it"),
        assistant("a1", "u1", "msg_1", tool_use("toolu_1", "cat config.py")),
        user("u2", "a1", [{"type": "tool_result", "tool_use_id": "toolu_1",
                           "content": f'OPENAI_KEY = "{SECRETS[0]}"'}]),
        assistant("a2", "u2", "msg_2", {"type": "tool_use", "id": "toolu_2", "name": "Read",
                                        "input": {"file_path": "/repo/.env"}}),
        user("u3", "a2", [{"type": "tool_result", "tool_use_id": "toolu_2", "content": env}]),
        assistant("a3", "u3", "msg_3", tool_use("toolu_3", "cat deploy_key")),
        user("u4", "a3", [{"type": "tool_result", "tool_use_id": "toolu_3", "content": PEM}]),
        assistant("a4", "u4", "msg_4", text("Found the keys.")),
    ]
    return write_session(folder, records)


def test_planted_secrets_never_leave(tmp_path: Path) -> None:
    session = planted_session(tmp_path / "p")
    with LLMServer(scripted) as server:
        report = run_cli(session, tmp_path / "out", pool(server.url, "ta"))
        bodies = json.dumps(server.requests)
    assert len(server.requests) == 4
    for secret in SECRETS:
        assert secret not in bodies
    assert "[REDACTED:" in bodies and sum(report["redactions"].values()) >= 4


def test_api_key_is_in_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-test-SECRET1234567890abcdef"
    monkeypatch.setenv("REPLAY_ENDPOINT_API_KEY", key)
    session = planted_session(tmp_path / "p")
    with LLMServer(lambda body: Reply({"error": {"message": "overloaded"}}, status=401)
                   if body["model"] == "tbad" else scripted(body)) as server:
        run_cli(session, tmp_path / "out", pool(server.url, "ta", "tbad"))
        assert any(key in json.dumps(h) for h in server.headers)  # it was really sent
    for path in [*(tmp_path / "out").rglob("*"), tmp_path / "cache.sqlite"]:
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("flag", [[], ["--no-redact"]])
def test_no_redact_sends_as_is(tmp_path: Path, flag: list[str]) -> None:
    session = planted_session(tmp_path / "p")
    with LLMServer(scripted) as server:
        run_cli(session, tmp_path / "out", pool(server.url, "ta"), *flag)
        assert (SECRETS[1] in json.dumps(server.requests)) == bool(flag)


def test_faults_lose_no_state(fixtures_root: Path, tmp_path: Path) -> None:
    """429 with Retry-After, a 500, an answer slower than --timeout (each once per prompt), a teacher
    with malformed tool-call JSON and one that is refused outright: every (state, teacher) ends up
    with a proposal or a counted failure."""
    session = next(fixtures_root.rglob("d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl"))  # 4 states
    seen: dict[tuple[str, str], int] = {}

    def responder(body: dict) -> Reply:
        model, key = body["model"], request_key(body)
        attempt = seen[(model, key)] = seen.get((model, key), 0) + 1
        if model == "limited" and attempt == 1:
            return Reply({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "0"})
        if model == "crashy" and attempt == 1:
            return Reply({"error": {"message": "boom"}}, status=500)
        if model == "slow" and attempt == 1:
            return Reply(scripted(body).body, delay=1.5)
        if model == "garbled":
            return Reply(chat_completion(tool_calls=[{"name": "Bash", "arguments": '{"command": "ls'}]))
        if model == "refused":
            return Reply({"error": {"message": "bad key"}}, status=401)
        return scripted(body)

    names = ("limited", "crashy", "slow", "garbled", "refused")
    with LLMServer(responder) as server:
        report = run_cli(session, tmp_path / "out", pool(server.url, *names), "--timeout", "0.5")
    proposals = read_jsonl(tmp_path / "out" / "proposals.jsonl")
    assert sorted((p["state_id"], p["teacher"]) for p in proposals) == sorted(
        (f"claude_code:d6e0bada-1959-4eec-a9d2-0bfade768d8f:{t}", n) for t in range(4) for n in names)
    by_teacher = {n: [p for p in proposals if p["teacher"] == n] for n in names}
    for name in ("limited", "crashy", "slow"):
        assert all(p["action"] for p in by_teacher[name]), name  # retried, then answered
    assert all(p["error"] == "invalid_tool_arguments" for p in by_teacher["garbled"])
    assert all(p["error"].startswith("auth") for p in by_teacher["refused"])
    assert seen[("refused", next(k for m, k in seen if m == "refused"))] == 1  # never retried
    calls = report["teacher_calls"]
    assert calls["failed"] == 4 and calls["invalid"] == 4
    assert calls["retries"] >= 12  # one per faulty first attempt; a loaded machine may time out more
    assert report["states"] == 4 == (report["consensus"]["abstained"] + report["agree"] + report["pairs"])


def test_missing_api_key_is_one_line_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    session = planted_session(tmp_path / "p")
    code = main(["--source", str(session), "--out", str(tmp_path / "out"), "--teachers", "gpt-5,deepseek"])
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1
    assert "gpt-5 needs OPENAI_API_KEY" in error and "deepseek needs DEEPSEEK_API_KEY" in error
    assert not (tmp_path / "out" / "states.jsonl").exists()
    # a dry run calls nothing, so it needs no key
    assert main(["--source", str(session), "--out", str(tmp_path / "dry"), "--teachers", "gpt-5,deepseek",
                 "--dry-run"]) == 0
