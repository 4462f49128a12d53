"""Claude Code sessions whose teachers share a learnable preference the student lacks (issue #36).

Each session fixes one module in eight turns. The student's habits: it runs the tests with
`python -m unittest`, and edits a file before reading it. The teachers run `pytest -q` and read a file
before editing it. Turn by turn (`STEPS`), what the student does and what it led to:

    0 list      `ls`                                   ok
    1 unittest  `python -m unittest tests/test_M.py`   error   → recovers at 2 with `pytest -q ...`
    2 pytest    `pytest -q tests/test_M.py`            ok
    3 edit      Edit src/M.py, unread                  error   → recovers at 4 by reading it
    4 read      Read src/M.py                          ok
    5 fix       Edit src/M.py                          ok
    6 check     `python -m unittest tests/test_M.py`   ok      (the habit again; it works this time)
    7 reply     "Fixed."

So every session gives three DPO pairs (turns 1, 3, 6: the consensus is `pytest -q` or the Read, the
student's action rejected) and two failed states with a recovery (1, 3) whose recovery *is* the
teachers' preference: the recovery set (replay.train.heldout) embodies what the pairs teach.

Teachers (`answer`): `careful*` always answer as above. `stray` (#27's straying teacher, the cheap
one) prefers unittest and editing without reading at a third of the states, chosen by a seeded hash
(`STRAY`): there it proposes what the student did at the habit turns (no pair) and the habit at
the turns where the student had already recovered (2 and 4: a pair that teaches the habit).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from tests.llm_server import Reply, chat_completion
from tests.sessions import assistant, user, with_session, write_session

STEPS = ("list", "unittest", "pytest", "edit", "read", "fix", "check", "reply")
FAILED = {"unittest": "ModuleNotFoundError: No module named 'tests.test_{m}' (run it with pytest)",
          "edit": "File has not been read yet. Read it first before writing to it."}
MODULES = ("parser", "tokens", "dates", "urls", "csvio", "cache", "retry", "paths", "config", "shell",
           "units", "money", "color", "queue", "graph", "trie", "heap", "json5", "slug", "glob",
           "ranges", "vector", "matrix", "events")
TEACHERS = ("careful1", "careful2", "stray")
# USD per million input/output tokens (`#price=`): the careful teachers cost more than the stray one.
PRICES = {"careful1": "10/30", "careful2": "3/15", "stray": "0.5/1"}
STRAY = 333  # of 1000: the share of states where `stray` follows the habit
OLD, NEW = "    return value\n", "    return value.strip()\n"
_EPISODE = re.compile(r"\[episode (\d+)\]")


def unittest(module: str) -> dict[str, Any]:
    return {"name": "Bash", "arguments": {"command": f"python -m unittest tests/test_{module}.py"}}


def pytest_q(module: str) -> dict[str, Any]:
    return {"name": "Bash", "arguments": {"command": f"pytest -q tests/test_{module}.py"}}


def read(module: str) -> dict[str, Any]:
    return {"name": "Read", "arguments": {"file_path": f"/repo/src/{module}.py"}}


def edit(module: str) -> dict[str, Any]:
    return {"name": "Edit", "arguments": {"file_path": f"/repo/src/{module}.py", "old_string": OLD,
                                          "new_string": NEW}}


def student(step: str, module: str) -> dict[str, Any] | str:
    """The student's action at a step: a tool call or a text reply."""
    return {"list": {"name": "Bash", "arguments": {"command": "ls"}}, "unittest": unittest(module),
            "pytest": pytest_q(module), "edit": edit(module), "read": read(module), "fix": edit(module),
            "check": unittest(module), "reply": "Fixed."}[step]


def preferred(step: str, module: str) -> dict[str, Any] | str:
    """What the careful teachers do at a step."""
    return {"unittest": pytest_q(module), "check": pytest_q(module), "edit": read(module)}.get(
        step, student(step, module))


def habit(step: str, module: str) -> dict[str, Any] | str:
    """What the stray teacher does where it follows the student's habit."""
    return {"pytest": unittest(module), "check": unittest(module), "unittest": unittest(module),
            "read": edit(module), "edit": edit(module)}.get(step, student(step, module))


def roll(*parts: object) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest(), 16) % 1000


def answer(model: str, episode: int, turn: int) -> dict[str, Any] | str:
    step, module = STEPS[turn], MODULES[episode]
    if model.startswith("stray") and roll(model, episode, turn) < STRAY:
        return habit(step, module)
    return preferred(step, module)


def respond(body: dict[str, Any]) -> Reply:
    """The loopback teachers: the episode from the first user message, the turn from the history."""
    messages = body["messages"]
    first = next(m["content"] for m in messages if m["role"] == "user")
    episode = int(_EPISODE.search(first if isinstance(first, str) else json.dumps(first)).group(1))
    turn = sum(m["role"] == "assistant" for m in messages)
    proposal = answer(body.get("model", ""), episode, turn)
    if isinstance(proposal, str):
        return Reply(chat_completion(proposal, model=body.get("model", "")))
    return Reply(chat_completion(tool_calls=[proposal], model=body.get("model", "")))


def pool(url: str, *names: str) -> str:
    """`--teachers` for the scripted models at `url`, each at its price."""
    return ",".join(f"{n}=openai/{n}@{url}#price={PRICES.get(n, '1/2')}" for n in names)


def _block(action: dict[str, Any] | str, call_id: str) -> dict[str, Any]:
    if isinstance(action, str):
        return {"type": "text", "text": action}
    return {"type": "tool_use", "id": call_id, "name": action["name"], "input": action["arguments"]}


def _result(step: str, module: str) -> tuple[str, bool]:
    if step in FAILED:
        return FAILED[step].format(m=module), True
    return {"list": "src\ntests\nsetup.py", "pytest": "1 failed, 3 passed in 0.05s",
            "read": f"def {module}(value):\n{OLD}", "fix": "The file has been updated.",
            "check": "Ran 4 tests in 0.003s\n\nOK"}[step], False


# The request shape a CLI 2.1.3xx session records: these three tools, not the dozen default ones (short
# prompts keep a CPU training run within seconds).
SHAPE = {"type": "api-request-shape", "shape": {"tools": [
    {"name": "Bash", "description": "Run a shell command.", "input_schema": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "Read", "description": "Read a file.", "input_schema": {
        "type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}},
    {"name": "Edit", "description": "Replace a string in a file you have read.", "input_schema": {
        "type": "object", "properties": {"file_path": {"type": "string"}, "old_string": {"type": "string"},
                                         "new_string": {"type": "string"}},
        "required": ["file_path", "old_string", "new_string"]}}]}}


def write_sessions(root: Path, episodes: int = 16) -> Path:
    """One session per episode under `root/-repo` (at most `len(MODULES)`); returns `root`."""
    for number in range(episodes):
        module = MODULES[number]
        records: list[dict[str, Any]] = [SHAPE, user("u0", None, f"[episode {number}] {module}() keeps the "
                                                                 f"whitespace of a value. Fix it.")]
        parent = "u0"
        for turn, step in enumerate(STEPS):
            call_id = f"toolu_{number:02d}_{turn}"
            ts = f"2025-11-17T11:{number:02d}:{2 * turn:02d}.000Z"
            records.append(assistant(f"a{turn}", parent, f"msg_{number:02d}_{turn}",
                                     _block(student(step, module), call_id), ts=ts))
            if step == "reply":
                break
            output, error = _result(step, module)
            result = {"type": "tool_result", "tool_use_id": call_id, "content": output, "is_error": error}
            records.append(user(f"u{turn + 1}", f"a{turn}", [result],
                                ts=f"2025-11-17T11:{number:02d}:{2 * turn + 1:02d}.000Z"))
            parent = f"u{turn + 1}"
        session = f"{number:08d}-0000-4000-8000-000000000000"
        write_session(root / "-repo", with_session(records, session), name=session)
    return root
