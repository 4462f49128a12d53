"""Make Codex CLI sessions with the real Codex CLI against a scripted model on 127.0.0.1.

    python examples/make_codex_sessions.py [--version 0.50.0] [--out tests/data/agents/codex/made]

The CLI comes from npm (`npm pack @openai/codex@VERSION`, cached under ~/.cache/teacher-replay/codex);
it runs `codex exec` on a tiny project with CODEX_HOME set to a temporary folder, so the rollout lands
under $CODEX_HOME/sessions/YYYY/MM/DD/, with a model provider whose `base_url` is this script's
OpenAI chat-completions server (`wire_api = "chat"`, streamed as the API does). The "model" answers from
a script: a shell call, a patch (apply_patch through the shell, as Codex's chat tools offer it), a
failing command, then an answer. Nothing leaves the machine. The rollouts are copied to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "teacher-replay" / "codex"
MODEL = "gpt-5-codex"
# Fixed, because the cwd is written in the rollout; emptied only when it holds our marker.
WORKSPACE = Path(tempfile.gettempdir()) / "teacher-replay-codex-example"
MARK = ".made-by-make-codex-sessions"
PATCH = ("*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n-    return a - b\n"
         "+    return a + b\n*** End Patch\n")
# Each step answers one request: a list of shell commands (argv), or the final text.
SCRIPT: list[list[list[str]] | str] = [
    [["bash", "-lc", "ls -la"]],
    [["bash", "-lc", "cat calc.py"], ["bash", "-lc", "cat test_calc.py"]],
    [["apply_patch", PATCH]],
    [["bash", "-lc", "python3 -m unittest -q test_missing"]],
    [["bash", "-lc", "python3 -m unittest -q"]],
    "Fixed `add` in calc.py (it subtracted); the tests pass.",
]
PROJECT = {"calc.py": "def add(a, b):\n    return a - b\n",
           "test_calc.py": "import unittest\n\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
                           "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"}


def codex_binary(version: str) -> Path:
    """The CLI's Linux binary from the npm package (fetched once)."""
    binary = CACHE / version / "codex"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", f"@openai/codex@{version}"], cwd=tmp, check=True,
                       capture_output=True)
        tgz = next(Path(tmp).glob("*.tgz"))
        with tarfile.open(tgz) as archive:
            member = archive.getmember("package/vendor/x86_64-unknown-linux-musl/codex/codex")
            source = archive.extractfile(member)
            assert source is not None
            binary.write_bytes(source.read())
    binary.chmod(0o755)
    return binary


def _step_of(body: dict[str, Any]) -> int:
    """Which step a request is: how many assistant messages it already holds."""
    return sum(1 for m in body.get("messages") or () if m.get("role") == "assistant")


def _chunks(step: list[list[str]] | str, index: int) -> list[dict[str, Any]]:
    base = {"id": f"chatcmpl-{index}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": MODEL}
    if isinstance(step, str):
        return [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": step}}]},
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    calls = [{"index": n, "id": f"call_{index}_{n}", "type": "function",
              "function": {"name": "shell", "arguments": json.dumps({"command": argv})}}
             for n, argv in enumerate(step)]
    return [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": calls}}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {**base, "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10,
                                              "total_tokens": 110}}]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    requests: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.requests.append(body)
        step = _step_of(body)
        chunks = _chunks(SCRIPT[min(step, len(SCRIPT) - 1)], step)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for chunk in chunks:
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except BrokenPipeError:   # the CLI may hang up once it has the finish_reason
            pass
        self.close_connection = True


def make(version: str, out: Path) -> list[Path]:
    binary = codex_binary(version)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if WORKSPACE.exists():
                if not (WORKSPACE / MARK).exists():
                    raise SystemExit(f"{WORKSPACE} exists and was not made by this script")
                shutil.rmtree(WORKSPACE)
            home, work = Path(tmp) / "codex-home", WORKSPACE
            home.mkdir()
            work.mkdir()
            (work / MARK).write_text("")
            for name, text in PROJECT.items():
                (work / name).write_text(text)
            (home / "config.toml").write_text(
                f'model = "{MODEL}"\nmodel_provider = "loopback"\napproval_policy = "never"\n'
                f'sandbox_mode = "danger-full-access"\n\n[model_providers.loopback]\nname = "loopback"\n'
                f'base_url = "http://127.0.0.1:{server.server_address[1]}/v1"\nwire_api = "chat"\n'
                f'env_key = "LOOPBACK_KEY"\n')
            env = {**os.environ, "CODEX_HOME": str(home), "LOOPBACK_KEY": "loopback", "HOME": tmp}
            done = subprocess.run([str(binary), "exec", "--skip-git-repo-check", "-C", str(work),
                                   "The test fails: fix calc.py."], env=env, capture_output=True,
                                  text=True, timeout=300)
            if done.returncode != 0:
                raise SystemExit(f"codex exec failed ({done.returncode}): {done.stderr[-2000:]}")
            made = sorted((home / "sessions").rglob("rollout-*.jsonl"))
            out.mkdir(parents=True, exist_ok=True)
            return [Path(shutil.copy(path, out / path.name)) for path in made]
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="0.50.0", help="the @openai/codex version (npm)")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "agents" / "codex" / "made")
    args = parser.parse_args()
    for path in make(args.version, args.out):
        print(path, path.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
