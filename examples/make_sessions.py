"""Regenerate examples/sessions/: small Claude Code sessions made by the real Claude Code CLI.

    python -m collect.claude_code_cli fetch        # the CLI pinned in configs/claude_code_cli.toml (npm)
    python examples/make_sessions.py               # rewrites examples/sessions/

The CLI runs `claude -p` on a tiny project with HOME set to a temporary folder, so the session lands under
$HOME/.claude/projects, against a scripted Anthropic Messages server on 127.0.0.1 (this file): the
"model" answers each request from a script (SSE when the CLI streams, as the API does). Nothing leaves
the machine. The scripts cover tool calls, a parallel call, a subagent (the Agent tool) and an
auto-compaction (the server reports a nearly full context; the CLI compacts at --autocompact).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collect.claude_code_cli import cached_binary, find_binary, load_claude_code_spec  # noqa: E402
from collect.proxy_translate import sse_events  # noqa: E402

OUT = ROOT / "examples" / "sessions"
# Fixed, because the cwd is written in every record and $HOME in the compaction summary.
WORKSPACE = Path("/tmp/teacher-replay-examples")
MARK = ".made-by-make-sessions"        # the only folder this script empties is one it made
MODEL = "claude-sonnet-4-6"
SYSTEM = ("You are Claude Code, a coding agent. Use the tools to inspect and change the project in the "
          "working directory; keep changes small and check them by running code.")

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = ("import unittest\n\nfrom calc import add, mul\n\n\nclass CalcTest(unittest.TestCase):\n"
         "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
         "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n\n"
         "if __name__ == \"__main__\":\n    unittest.main()\n")
PROJECT = {"calc.py": CALC, "test_calc.py": TESTS,
           "README.md": "# calc\n\nA tiny calculator. TODO: add div.\n",
           "notes.txt": "TODO: docs\nTODO: packaging\n"}
FIXED = "def add(a, b):\n    return a + b\n"

# A step is a list of blocks: str → a text block, dict → a tool_use {name: input}. The last step of a
# script is the answer that ends the session.
SCRIPTS: dict[str, dict[str, Any]] = {
    "fix-add": {
        "prompt": "[script: fix-add] The tests fail. Find the bug in calc.py and fix it.",
        "tools": "Bash,Read,Edit",
        "steps": [
            ["I'll read the code and its tests.", {"Read": {"file_path": "{cwd}/calc.py"}},
             {"Read": {"file_path": "{cwd}/test_calc.py"}}],
            [{"Bash": {"command": "python3 -m unittest -q test_calc", "description": "Run the tests"}}],
            ["`add` subtracts.", {"Edit": {"file_path": "{cwd}/calc.py",
                                           "old_string": CALC.split("\n\n\n")[0] + "\n",
                                           "new_string": FIXED}}],
            [{"Bash": {"command": "python3 -m unittest -q test_calc", "description": "Run the tests again"}}],
            ["Fixed: `add` returned `a - b`; it returns `a + b` now and both tests pass."],
        ],
    },
    "todos-agent": {
        "prompt": "[script: todos-agent] List every TODO in this project, using a subagent to search.",
        "tools": "Agent,Grep,Read",
        "steps": [
            [{"Agent": {"description": "Find TODOs", "subagent_type": "general-purpose",
                        "run_in_background": False,   # in the foreground: the answer waits for it
                        "prompt": "[agent: find-todos] Find every line containing TODO in the project at "
                                  "{cwd} and report file:line: text."}}],
            ["There are three TODOs: add div (README.md), docs and packaging (notes.txt)."],
        ],
    },
    "find-todos": {  # the subagent's own conversation
        "steps": [
            [{"Grep": {"pattern": "TODO", "path": "{cwd}", "output_mode": "content", "-n": True}}],
            ["README.md:3: TODO: add div.\nnotes.txt:1: TODO: docs\nnotes.txt:2: TODO: packaging"],
        ],
    },
    "long-compact": {
        "prompt": "[script: long-compact] Add a `div` function to calc.py.",
        "tools": "Bash,Read,Edit,Glob",
        "compact_after": 1,      # the answer to step 1 reports a nearly full context: the CLI compacts
        "steps": [
            [{"Read": {"file_path": "{cwd}/calc.py"}}],
            [{"Glob": {"pattern": "*.py"}}],
            [{"Edit": {"file_path": "{cwd}/calc.py", "old_string": "    return a * b\n",
                       "new_string": "    return a * b\n\n\ndef div(a, b):\n    return a / b\n"}}],
            [{"Bash": {"command": "python3 -c 'from calc import div; print(div(6, 3))'",
                       "description": "Try div"}}],
            ["Added `div(a, b)`; `div(6, 3)` is 2.0."],
        ],
    },
}
SUMMARY = ("<analysis>The user wants a div function in calc.py.</analysis>\n<summary>[script: {name}] "
           "[summary of steps 0-{last}] The user asked for `div(a, b)` in calc.py; calc.py was read "
           "(add, mul) and the Python files listed.</summary>")
COMPACT_ASK = "summary of the conversation so far"      # the CLI's compaction prompt asks for this
STEP = re.compile(r"toolu_ex_([a-z-]+)_(\d+)_\d+|\[summary of steps 0-(\d+)\]")


def _script_of(request: dict[str, Any]) -> str | None:
    """The script a request belongs to: the marker in its user text (a subagent's prompt wins)."""
    texts = []
    for message in request.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts += [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    text = "\n".join(texts)
    for pattern in (r"\[agent: ([a-z-]+)\]", r"\[script: ([a-z-]+)\]"):
        if found := re.search(pattern, text):
            return found.group(1)
    return None


def _next_step(name: str, request: dict[str, Any]) -> int:
    """Stateless: one past the latest step whose ids (or compaction summary) the request carries."""
    done = -1
    for found in STEP.finditer(json.dumps(request.get("messages") or [])):
        if found.group(3) is not None:
            done = max(done, int(found.group(3)))
        elif found.group(1) == name:
            done = max(done, int(found.group(2)))
    return done + 1


def _is_compaction(request: dict[str, Any]) -> bool:
    content = (request.get("messages") or [{}])[-1].get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    return any(COMPACT_ASK in str(b.get("text", "")) for b in blocks if isinstance(b, dict))


def answer(request: dict[str, Any], cwd: Path, log: list[dict[str, Any]]) -> dict[str, Any]:
    """The Messages response to one request."""
    name = _script_of(request)
    log.append({"script": name, "model": request.get("model"), "n": len(request.get("messages") or []),
                "tools": [t.get("name") for t in request.get("tools") or []],
                "last": json.dumps((request.get("messages") or [{}])[-1])[:300]})
    number = len(log)
    usage = {"input_tokens": len(json.dumps(request)) // 4, "output_tokens": 20}
    if name is None or not request.get("tools"):
        blocks = [{"type": "text", "text": "Example session"}]
    elif _is_compaction(request):
        blocks = [{"type": "text", "text": SUMMARY.format(name=name, last=_next_step(name, request) - 1)}]
    else:
        script = SCRIPTS[name]
        step = _next_step(name, request)
        steps = script["steps"]
        blocks = _blocks(name, step, steps[min(step, len(steps) - 1)], cwd)
        if step == script.get("compact_after"):
            usage["input_tokens"] = 99_000
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {"id": f"msg_ex_{number:04d}_{uuid.uuid4().hex[:8]}", "type": "message", "role": "assistant",
            "model": request.get("model") or MODEL, "content": blocks, "stop_reason": stop,
            "stop_sequence": None, "usage": usage}


def _blocks(name: str, step: int, spec: list[Any], cwd: Path) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for index, item in enumerate(spec):
        if isinstance(item, str):
            blocks.append({"type": "text", "text": item})
            continue
        (tool, arguments), = item.items()
        filled = json.loads(json.dumps(arguments).replace("{cwd}", str(cwd)))
        blocks.append({"type": "tool_use", "id": f"toolu_ex_{name}_{step}_{index}", "name": tool,
                       "input": filled})
    return blocks


class Server:
    """The scripted Anthropic Messages API on 127.0.0.1 (`with Server(cwd) as server: server.url`)."""

    def __init__(self, cwd: Path) -> None:
        self.cwd, self.log = cwd, []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path.split("?")[0].endswith("/count_tokens"):
                    return self._send(200, {"input_tokens": len(json.dumps(body)) // 4})
                if not self.path.split("?")[0].endswith("/v1/messages"):
                    return self._send(404, {"type": "error", "error": {"type": "not_found_error",
                                                                       "message": self.path}})
                message = answer(body, server.cwd, server.log)
                if not body.get("stream"):
                    return self._send(200, message)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in sse_events(message):
                    self.wfile.write(event)
                self.close_connection = True
                return None

            def _send(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


def run_session(claude: Path, name: str, workspace: Path, log: Path | None) -> None:
    """One `claude -p` session of the script `name`, in its own project folder under `workspace`."""
    cwd, home = workspace / name, workspace / "home"
    shutil.rmtree(cwd, ignore_errors=True)
    cwd.mkdir(parents=True)
    for file, text in PROJECT.items():
        (cwd / file).write_text(text)
    spec = load_claude_code_spec()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **spec.env,
           "ANTHROPIC_MODEL": MODEL, "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
           "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODEL}
    session = str(uuid.uuid5(uuid.NAMESPACE_URL, f"teacher-replay/examples/{name}"))
    with Server(cwd) as server:
        env["ANTHROPIC_BASE_URL"] = server.url
        argv = [str(claude), "-p", SCRIPTS[name]["prompt"], "--dangerously-skip-permissions",
                "--model", MODEL, "--session-id", session, "--tools", SCRIPTS[name]["tools"],
                "--system-prompt", SYSTEM,
                "--system-prompt-snapshot", "off", "--disable-slash-commands", "--strict-mcp-config",
                "--autocompact", "100000", "--max-turns", "12"]
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        if log is not None:
            log.write_text("".join(json.dumps(row) + "\n" for row in server.log))
    if done.returncode != 0:
        raise SystemExit(f"make_sessions: claude -p ({name}) exited {done.returncode}: "
                         f"{(done.stderr or done.stdout).strip()[-500:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="where the projects folder goes")
    parser.add_argument("--claude-binary", type=Path, default=None)
    parser.add_argument("--workspace", type=Path, default=WORKSPACE,
                        help="scratch folder for the projects and $HOME (its path is in the sessions)")
    parser.add_argument("--log", type=Path, default=None, help="write the requests seen here (debugging)")
    args = parser.parse_args(argv)
    spec = load_claude_code_spec()
    claude = find_binary(args.claude_binary, spec)
    if claude is None:
        raise SystemExit(f"make_sessions: no Claude Code CLI at {cached_binary(spec)}; {spec.missing_hint}")
    workspace = args.workspace.resolve()
    if workspace.exists() and any(workspace.iterdir()) and not (workspace / MARK).exists():
        raise SystemExit(f"make_sessions: {workspace} exists and was not made by this script; "
                         "give an empty or new --workspace")
    shutil.rmtree(workspace, ignore_errors=True)
    workspace.mkdir(parents=True)
    (workspace / MARK).touch()
    try:
        for name, script in SCRIPTS.items():
            if "prompt" in script:
                log = args.log / f"{name}.jsonl" if args.log else None
                if log:
                    log.parent.mkdir(parents=True, exist_ok=True)
                run_session(claude, name, workspace, log)
        shutil.rmtree(args.out, ignore_errors=True)
        shutil.copytree(workspace / "home" / ".claude" / "projects", args.out)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    for path in sorted(args.out.rglob("*")):
        if path.is_file():
            print(f"{path.stat().st_size:>8}  {path.relative_to(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
