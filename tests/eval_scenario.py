"""Many short Claude Code sessions, teachers that always agree, and models to evaluate whose agreement
with the teachers' consensus is set: the scenario `replay.eval`'s tests run on.

Trace k (one session file each) has `TURNS` turns, one Bash call each. Even turns fail (`cat
missing_k_t.py`: an `is_error` result) and the odd turn after is the student's recovery (`cat
src/mod_k_t.py`). A request is placed by its first user message (`Task k`) and its number of tool
results (the turn).

What each model answers at state (k, t):
- teachers `ta`, `tb`: `right(k, t)`: at a failed turn the student's recovery, else `pytest -q ...`;
  they always agree, so every state has a consensus (and, the student never doing what they say, a pair);
- `agreeNN` (e.g. `agree90`): `right` at a pseudo-random NN% of the states (a hash of model and state,
  independent between states), else `git log` (another intent);
- `student`: the student's own action;
- `broken`: a call to a tool the state does not offer at every third state, a Bash call without its
  required `command` at the next, else `right`;
- `leaky`: a command holding a GitHub token (`SECRET`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from tests.llm_server import Reply, chat_completion
from tests.sessions import assistant, user, write_session

TRACES = 32
TURNS = 8
SECRET = "ghp_" + "Q8zR2lK9xW4tN7vB1mC5hD3fG6jS0yAp4E3u"
_TASK = re.compile(r"Task (\d+):")


def student(k: int, t: int) -> str:
    return f"cat missing_{k}_{t}.py" if t % 2 == 0 else f"cat src/mod_{k}_{t - 1}.py"


def failed(t: int) -> bool:
    return t % 2 == 0 and t + 1 < TURNS


def right(k: int, t: int) -> str:
    return student(k, t + 1) if failed(t) else f"pytest -q tests/test_{k}_{t}.py"


def roll(model: str, k: int, t: int) -> float:
    """A uniform draw in [0, 1) fixed by (model, state)."""
    return int(hashlib.sha256(f"{model}:{k}:{t}".encode()).hexdigest(), 16) % 10_000 / 10_000


def state_of(body: dict[str, Any]) -> tuple[int, int]:
    """(trace k, turn t) of a request: the task number and how many tool results it holds."""
    messages = body.get("messages") or []
    found = _TASK.search(json.dumps(messages))
    if found is None:
        raise ValueError("not a request of this scenario")
    return int(found.group(1)), sum(m.get("role") == "tool" for m in messages)


def bash(command: str) -> dict[str, Any]:
    return {"name": "Bash", "arguments": {"command": command, "description": "run it"}}


def call(model: str, k: int, t: int) -> dict[str, Any]:
    """The tool call `model` answers at state (k, t)."""
    if model.startswith("agree"):
        rate = int(model.removeprefix("agree")) / 100
        return bash(right(k, t) if roll(model, k, t) < rate else f"git log -n {t + 1}")
    if model == "leaky":
        return bash(f"curl -H 'Authorization: token {SECRET}' https://api.github.com/user")
    if model == "student":
        return bash(student(k, t))
    if model == "broken" and (k + t) % 3 == 0:
        return {"name": "Shell", "arguments": {"command": right(k, t)}}
    if model == "broken" and (k + t) % 3 == 1:
        return {"name": "Bash", "arguments": {"cmd": right(k, t)}}
    return bash(right(k, t))


def respond(body: dict[str, Any]) -> Reply:
    model = body.get("model", "")
    k, t = state_of(body)
    return Reply(chat_completion(tool_calls=[call(model, k, t)], model=model))


def pool(url: str, *names: str) -> str:
    """`--teachers` / `--models` for the scripted models at `url`."""
    return ",".join(f"{n}=openai/{n}@{url}" for n in names)


def write(folder: Path) -> list[Path]:
    """One session file per trace under `folder`."""
    return [_session(folder / "-repo", k) for k in range(TRACES)]


def _session(folder: Path, k: int) -> Path:
    session = f"00000000-0000-4000-8000-{k:012d}"
    records: list[dict[str, Any]] = [user(f"u{k}", None, f"Task {k}: fix the import error in src/.",
                                          sessionId=session)]
    parent = f"u{k}"
    for t in range(TURNS):
        tool_id, a, r = f"toolu_{k}_{t}", f"a{k}_{t}", f"r{k}_{t}"
        second = f"{t:02d}"
        block = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": student(k, t)}}
        records.append(assistant(a, parent, f"msg_{k}_{t}", block, ts=f"2025-11-17T11:00:{second}.000Z",
                                 sessionId=session))
        output = f"cat: missing_{k}_{t}.py: No such file or directory" if t % 2 == 0 else "import os"
        block = {"type": "tool_result", "tool_use_id": tool_id, "content": output, "is_error": t % 2 == 0}
        records.append(user(r, a, [block], ts=f"2025-11-17T11:00:{second}.500Z", sessionId=session))
        parent = r
    return write_session(folder, records, name=session)
