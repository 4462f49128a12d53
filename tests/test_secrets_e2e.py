"""Issue #13 end to end through `python -m replay.run` and loopback servers: planted secrets reach no
teacher and no file under OUT, look-alikes survive, bad endpoints stop before any request, echoed keys
are scrubbed, an oversized answer is a counted failure within bounded memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ingestion.store import load_states
from replay.run import main
from tests.llm_server import LLMServer, Reply
from tests.secret_corpus import BENIGN, SECRETS
from tests.sessions import assistant, text, tool_result, tool_use, user, write_session
from tests.teacher_script import scripted

ROOT = Path(__file__).resolve().parents[1]


def _tool(call_id: str, name: str, arguments: dict) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def corpus_session(folder: Path) -> Path:
    """One session holding every planted secret where it says, and every look-alike in a tool result."""
    records: list[dict] = []
    parent: str | None = None
    n = 0

    def add(record_of) -> None:
        nonlocal parent, n
        n += 1
        uuid = f"r{n}"
        records.append(record_of(uuid, parent))
        parent = uuid

    def turn(block: dict, result: str | None = None) -> None:
        add(lambda u, p: assistant(u, p, f"msg_{n}", block))
        if result is not None:
            add(lambda u, p: user(u, p, tool_result(block["id"], result)))

    prompt = "set up the deploy. " + " ".join(s.text for s in SECRETS if s.where == "user")
    add(lambda u, p: user(u, p, prompt))
    for i, secret in enumerate(SECRETS):
        call = f"toolu_{i}"
        if secret.where == "tool_args":
            turn(tool_use(call, secret.text), "done")
        elif secret.where == "tool_result":
            turn(tool_use(call, "cat config"), secret.text)
        elif secret.where == "mcp":  # an MCP server's tool: its input nests objects
            turn(_tool(call, "mcp__slack__slack_post_message", json.loads(secret.text)), "posted")
        elif secret.where == "write":
            turn(_tool(call, "Write", {"file_path": f"/repo/f{i}.py", "content": secret.text}), "written")
        elif secret.where == "edit":
            turn(_tool(call, "Edit", {"file_path": "/repo/app.py", "old_string": "x = 1",
                                      "new_string": secret.text}), "edited")
        elif secret.where == "thinking":  # one API response written as two lines: thinking, then the call
            msg = f"msg_think_{i}"
            add(lambda u, p, s=secret, m=msg: assistant(u, p, m, {"type": "thinking", "thinking": s.text,
                                                                  "signature": "c2ln"}))
            add(lambda u, p, m=msg, c=call: assistant(u, p, m, tool_use(c, "ls")))
            add(lambda u, p, c=call: user(u, p, tool_result(c, "a.py")))
    turn(tool_use("toolu_benign", "cat notes.txt"), "\n".join(BENIGN))
    action = next(s for s in SECRETS if s.where == "action")
    turn(tool_use("toolu_last", action.text))
    return write_session(folder, records)


def _forms(secret: str) -> set[bytes]:
    return {secret.encode(), json.dumps(secret)[1:-1].encode()}


def test_planted_secrets_reach_no_teacher_and_no_file(tmp_path: Path) -> None:
    session = corpus_session(tmp_path / "p")
    out = tmp_path / "out"
    with LLMServer(scripted) as server:
        # --no-pseudonymise: the benign look-alikes hold an address and a home path, which the
        # pseudonymisation (on by default, tests/test_pseudonymise.py) replaces; this is about secrets.
        assert main(["--source", str(session), "--out", str(out), "--cache", str(tmp_path / "c.sqlite"),
                     "--teachers", f"ta=openai/ta@{server.url}", "--no-pseudonymise"]) == 0
        sent = json.dumps(server.requests).encode()
    report = json.loads((out / "report.json").read_text())
    assert report["states"] == len(server.requests) >= 30 and report["pairs"] >= 1
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".arrow" for p in files) and (out / "pairs.jsonl").exists()
    leaks = [(s.kind, "request") for s in SECRETS if any(f in sent for f in _forms(s.needle))]
    leaks += [(s.kind, str(p)) for p in files for s in SECRETS
              if any(f in p.read_bytes() for f in _forms(s.needle))]
    assert leaks == []
    damaged = [b for b in BENIGN if json.dumps(b)[1:-1].encode() not in sent]
    assert damaged == []
    assert sum(report["redactions"].values()) >= len(SECRETS) - 2  # a few share a message with another
    thinking = [s.needle for s in SECRETS if s.where == "thinking"]
    states = "\n".join(s.model_dump_json() for s in load_states(out))
    assert '"thinking":"' in states and "[REDACTED:" in states and not [t for t in thinking if t in states]
    assert "redaction**: on" in (out / "README.md").read_text()


def test_no_redact_keeps_raw_text_and_the_card_says_so(tmp_path: Path) -> None:
    session = corpus_session(tmp_path / "p")
    with LLMServer(scripted) as server:
        assert main(["--source", str(session), "--out", str(tmp_path / "out"), "--no-redact",
                     "--cache", str(tmp_path / "c.sqlite"), "--teachers", f"ta=openai/ta@{server.url}"]) == 0
        assert SECRETS[0].needle in json.dumps(server.requests)
    assert SECRETS[0].needle in "\n".join(s.model_dump_json() for s in load_states(tmp_path / "out"))
    assert "OFF (--no-redact)" in (tmp_path / "out" / "README.md").read_text()


@pytest.mark.parametrize("endpoint", ["openai/gpt-5@127.0.0.1:{port}/v1",
                                      "openai/gpt-5@HTTP://127.0.0.1:{port}/v1",
                                      "openai/gpt-5@ftp://127.0.0.1:{port}/v1"])
def test_bad_endpoint_is_one_line_and_no_request(endpoint: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capfd: pytest.CaptureFixture[str]) -> None:
    session = corpus_session(tmp_path / "p")
    with LLMServer(scripted) as server:
        # Were the URL taken as part of the model name, litellm would call the provider's default
        # endpoint: here that is this server, with this key.
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-Q8zR2lK9xW4tN7vB1mC5hD3fG6jS0yAp")
        port = server.url.split(":")[2].split("/")[0]
        code = main(["--source", str(session), "--out", str(tmp_path / "out"),
                     "--teachers", "name=" + endpoint.format(port=port)])
        assert server.requests == []
    err = capfd.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: bad teacher endpoint")
    assert not (tmp_path / "out" / "states.jsonl").exists()


KEYS = {
    "REPLAY_ENDPOINT_API_KEY": "sk-proj-Ep9Zq2LmXw7Tn4Vb1Mc5Hd3Fg6Js0YaK8uR2",
    "OPENAI_API_KEY": "sk-Zq2LmXw7Tn4Vb1Mc5Hd3Fg6Js0YaK8uR2pQ4rS6tU8",
    "ANTHROPIC_API_KEY": "sk-ant-api03-Zq2LmXw7Tn4Vb1Mc5Hd3Fg6Js0YaK8uR2pQ4rS6tU8vW0",
    "GITHUB_TOKEN": "ghp_Zq2LmXw7Tn4Vb1Mc5Hd3Fg6Js0YaK8uR2pQ4",
    "HF_TOKEN": "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",
    "DEEPSEEK_API_KEY": "sk-9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "MY_SERVICE_TOKEN": "plainopaque7Zq2LmXw",
}


def test_401_echoing_every_key_leaks_none(tmp_path: Path) -> None:
    """A server that answers 401 with every key it could know in its message, and litellm's own logs at
    DEBUG: no key on stdout, stderr, in OUT or in the cache."""
    session = corpus_session(tmp_path / "p")
    echo = "; ".join(f"{k}={v} {json.dumps(v)}" for k, v in KEYS.items())
    with LLMServer(lambda body: Reply({"error": {"message": f"Incorrect API key: {echo}",
                                                 "type": "invalid_request_error"}}, status=401)) as server:
        env = {**KEYS, "PATH": "/usr/bin:/bin", "LITELLM_LOG": "DEBUG", "HOME": str(tmp_path),
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
        done = subprocess.run([sys.executable, "-m", "replay.run", "--source", str(session), "--out",
                               str(tmp_path / "out"), "--cache", str(tmp_path / "c.sqlite"),
                               "--max-states", "3", "--teachers", f"ta=openai/ta@{server.url}",
                               "--max-failed", "1"],  # every call fails, by design: still exit 0
                              cwd=ROOT, env=env, capture_output=True, timeout=300)
        assert any(KEYS["REPLAY_ENDPOINT_API_KEY"] in json.dumps(h) for h in server.headers)  # really sent
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    proposals = [json.loads(line) for line in (tmp_path / "out" / "proposals.jsonl").read_text().splitlines()]
    assert proposals and all(p["error"].startswith("auth") for p in proposals)
    outputs = [done.stdout, done.stderr]
    outputs += [p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()]
    outputs += [p.read_bytes() for p in tmp_path.glob("c.sqlite*")]
    leaked = [name for name, key in KEYS.items() for blob in outputs if any(f in blob for f in _forms(key))]
    assert leaked == []


_BIG_SERVER = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
SIZE, CHUNKED = int(sys.argv[1]), sys.argv[2] == "chunked"
HEAD = b'{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, ' \
       b'"finish_reason": "stop", "message": {"role": "assistant", "content": "'
TAIL = b'"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}'
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with open(sys.argv[3], "a") as log: log.write("request\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if CHUNKED: self.send_header("Transfer-Encoding", "chunked")
        else: self.send_header("Content-Length", str(len(HEAD) + SIZE + len(TAIL)))
        self.end_headers()
        block = b"a" * (1 << 20)
        try:
            for part in [HEAD] + [block] * (SIZE >> 20) + [TAIL]:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if CHUNKED else part)
            if CHUNKED: self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
server = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

_MEASURE = r"""
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB on Linux
sys.exit(done.returncode)
"""


@pytest.mark.parametrize("framing", ["chunked", "length"])
def test_200_mb_answer_is_a_counted_failure_in_bounded_memory(framing: str, tmp_path: Path) -> None:
    session = write_session(tmp_path / "p", [user("u1", None, "hi"),
                                             assistant("a1", "u1", "msg_1", text("hello")),
                                             user("u2", "a1", "again"),
                                             assistant("a2", "u2", "msg_2", text("bye"))])
    log = tmp_path / "requests.log"
    server = subprocess.Popen([sys.executable, "-c", _BIG_SERVER, str(200 << 20), framing, str(log)],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        env = {"PATH": "/usr/bin:/bin", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": str(tmp_path),
               "XDG_CACHE_HOME": str(tmp_path / "xdg")}
        done = subprocess.run([sys.executable, "-c", _MEASURE, sys.executable, "-m", "replay.run",
                               "--source", str(session), "--out", str(tmp_path / "out"),
                               "--cache", str(tmp_path / "c.sqlite"),
                               "--teachers", f"big=openai/m@http://127.0.0.1:{port}/v1",
                               "--max-failed", "1"],  # every call fails, by design: still exit 0
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    finally:
        server.kill()
        server.wait()
    assert done.returncode == 0, done.stderr[-2000:]
    peak_mb = int(done.stdout.strip().splitlines()[-1]) / 1024
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    proposals = [json.loads(line) for line in (tmp_path / "out" / "proposals.jsonl").read_text().splitlines()]
    assert report["teacher_calls"]["failed"] == report["states"] == 2
    assert all(p["error"].startswith("response_too_large") for p in proposals)
    assert log.read_text().count("request") == 2  # never retried
    assert peak_mb < 500, peak_mb
    print(f"peak RSS of the run ({framing}): {peak_mb:.0f} MB")
