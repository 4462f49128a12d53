"""Make Gemini CLI sessions with the real Gemini CLI against a scripted model on 127.0.0.1.

    python examples/make_gemini_sessions.py [--version 0.61.0] [--out tests/data/agents/gemini/made]

The CLI comes from npm (`npm pack @google/gemini-cli@VERSION`, one bundled folder, cached under
~/.cache/teacher-replay/gemini-cli); it runs `gemini -p` on a tiny project with HOME set to a temporary
folder, so the recording lands under $HOME/.gemini/tmp/<project>/chats/, and GOOGLE_GEMINI_BASE_URL set
to this script's server, which speaks the Gemini API's `generateContent` / `streamGenerateContent`
(SSE) as the @google/genai client calls them. The "model" answers the main conversation from a script
(a directory listing, a file read, a failing command, an edit, an answer) and the CLI's side requests
(next-speaker checks and the like) with a plain JSON answer. Nothing leaves the machine.
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "teacher-replay" / "gemini-cli"
MODEL = "gemini-2.5-pro"
WORKSPACE = Path(tempfile.gettempdir()) / "teacher-replay-gemini-example"
MARK = ".made-by-make-gemini-sessions"
PROMPT = "[script: fix-add] The test fails: fix calc.py."
PROJECT = {"calc.py": "def add(a, b):\n    return a - b\n",
           "test_calc.py": "import unittest\n\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
                           "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"}
# Each step answers one request of the main conversation: tool calls {name: args}, or the final text.
SCRIPT: list[list[dict[str, Any]] | str] = [
    [{"list_directory": {"dir_path": str(WORKSPACE)}}],
    [{"read_file": {"file_path": str(WORKSPACE / "calc.py")}}],
    [{"run_shell_command": {"command": "python3 -m unittest -q test_missing", "description": "run"}}],
    [{"replace": {"file_path": str(WORKSPACE / "calc.py"), "instruction": "add must add, not subtract",
                  "old_string": "return a - b", "new_string": "return a + b"}}],
    [{"run_shell_command": {"command": "python3 -m unittest -q", "description": "run the tests"}}],
    "Fixed `add` in calc.py (it subtracted); the tests pass.",
]


def cli(version: str) -> Path:
    """The CLI's bundle from the npm package (fetched once)."""
    bundle = CACHE / version / "package" / "bundle" / "gemini.js"
    if bundle.exists():
        return bundle
    (CACHE / version).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", f"@google/gemini-cli@{version}"], cwd=tmp, check=True,
                       capture_output=True)
        with tarfile.open(next(Path(tmp).glob("*.tgz"))) as archive:
            archive.extractall(CACHE / version, filter="data")
    return bundle


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    """One GenerateContentResponse: the script's step for the main conversation (the request holding
    the script's prompt), else a JSON answer for the CLI's own side requests."""
    contents = body.get("contents") or []
    text = json.dumps(contents)
    if "[script: fix-add]" not in text or "generationConfig" in body and \
            (body["generationConfig"] or {}).get("responseMimeType") == "application/json":
        parts = [{"text": json.dumps({"reasoning": "the model answered", "next_speaker": "user"})}]
    else:
        step = sum(1 for c in contents if c.get("role") == "model")
        planned = SCRIPT[min(step, len(SCRIPT) - 1)]
        parts = [{"text": planned}] if isinstance(planned, str) else [
            {"functionCall": {"name": name, "args": args}} for call in planned for name, args in call.items()]
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    return {"candidates": [candidate],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
            "modelVersion": MODEL}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    paths: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.paths.append(self.path)
        if ":countTokens" in self.path:
            self._json({"totalTokens": 100})
            return
        answer = _answer(body)
        if ":streamGenerateContent" not in self.path:
            self._json(answer)
            return
        payload = b"data: " + json.dumps(answer).encode() + b"\r\n\r\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._json({"models": [{"name": f"models/{MODEL}"}]})

    def _json(self, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def make(version: str, out: Path) -> list[Path]:
    bundle = cli(version)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as home:
            if WORKSPACE.exists():
                if not (WORKSPACE / MARK).exists():
                    raise SystemExit(f"{WORKSPACE} exists and was not made by this script")
                shutil.rmtree(WORKSPACE)
            WORKSPACE.mkdir()
            (WORKSPACE / MARK).write_text("")
            for name, text in PROJECT.items():
                (WORKSPACE / name).write_text(text)
            settings = Path(home) / ".gemini" / "settings.json"
            settings.parent.mkdir(parents=True)
            settings.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"},
                                                         "folderTrust": {"enabled": False}},
                                            "privacy": {"usageStatisticsEnabled": False},
                                            "telemetry": {"enabled": False}}))
            env = {**os.environ, "HOME": home, "GEMINI_API_KEY": "loopback",
                   "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}",
                   "GEMINI_CLI_NO_RELAUNCH": "true", "NO_COLOR": "1"}
            done = subprocess.run(["node", str(bundle), "-m", MODEL, "--yolo", "-p", PROMPT], cwd=WORKSPACE,
                                  env=env, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise SystemExit(f"gemini failed ({done.returncode}): {done.stderr[-3000:]}\n"
                                 f"requests: {_Handler.paths}")
            made = sorted((Path(home) / ".gemini" / "tmp").rglob("session-*.json*"))
            out.mkdir(parents=True, exist_ok=True)
            return [Path(shutil.copy(path, out / path.name)) for path in made]
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="0.61.0", help="the @google/gemini-cli version (npm)")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "agents" / "gemini" / "made")
    args = parser.parse_args()
    for path in make(args.version, args.out):
        print(path, path.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
