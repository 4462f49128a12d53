"""A Claude Code session where the student fails and recovers, and teachers scripted against it.

Turn t (0-based) is one Bash call. Even turns fail (`cat missing_t.py`: an `is_error` tool result);
the odd turn after is the student's recovery (`cat src/mod_t.py`), which works. Every tool result
says `RESULT t`, so a teacher can tell which state a prompt is (the turn after the last result).

What each teacher model proposes at state t (`answer`):
- `right(t)`: at a failed turn the student's recovery, else `pytest -q tests/test_t.py` (a pair);
- careful teachers (`careful*`): right, except at ~10% of the states a slip of their own;
- `stray*`: right two thirds of the time, else a wrong file or another intent (alternately);
- `recover*`: right, always; `repeat*`: the student's own action (at a failed turn: the failed call).
At every fourth state the careful and stray teachers write the right file read as a `Read` call where
the student ran `cat`: the same intent, another canonical action (hindsight's intent tier).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import orjson

from tests.llm_server import Reply, chat_completion
from tests.sessions import assistant, user, write_session

TURNS = 40
# USD per million input/output tokens (`#price=`): the careful teachers cost more than the stray one.
PRICES = {"careful1": "10/30", "careful2": "3/15", "stray": "0.5/1", "recover": "1/2", "repeat": "1/2"}
_RESULT = re.compile(r"RESULT (\d+)")


def student(t: int) -> str:
    return f"cat missing_{t}.py" if t % 2 == 0 else f"cat src/mod_{t - 1}.py"


def failed(t: int) -> bool:
    return t % 2 == 0 and t + 1 < TURNS


def right(t: int) -> str:
    return student(t + 1) if failed(t) else f"pytest -q tests/test_{t}.py"


def roll(model: str, t: int) -> int:
    return int(hashlib.sha256(f"{model}:{t}".encode()).hexdigest(), 16) % 1000


def answer(model: str, t: int) -> str:
    if model.startswith("recover"):
        return right(t)
    if model.startswith("repeat"):
        return student(t)
    if model.startswith("careful") and roll(model, t) < 100:
        return f"git diff --stat {model}"
    if model.startswith("stray") and roll(model, t) < 333:
        return f"cat src/wrong_{t}.py" if roll(model, t) % 2 else f"git log -n {t + 1}"
    return right(t)


def turn_of(body: dict[str, Any]) -> int:
    found = [int(n) for n in _RESULT.findall(json.dumps(body.get("messages")))]
    return max(found) + 1 if found else 0


def respond(body: dict[str, Any]) -> Reply:
    model = body.get("model", "")
    t = turn_of(body)
    command = answer(model, t)
    call: dict[str, Any] = {"name": "Bash", "arguments": {"command": command}}
    if t % 4 == 0 and command == right(t) and command.startswith("cat ") and not model.startswith("recover"):
        call = {"name": "Read", "arguments": {"file_path": f"/repo/{command.removeprefix('cat ')}"}}
    return Reply(chat_completion(tool_calls=[call], model=model))


def pool(url: str, *names: str) -> str:
    """`--teachers` for the scripted models at `url`, each at its price."""
    return ",".join(f"{n}=openai/{n}@{url}#price={PRICES.get(n, '1/2')}" for n in names)


def write(folder: Path) -> Path:
    """The session file (one trace of `TURNS` states) under `folder`."""
    records: list[dict[str, Any]] = [user("u0", None, "Fix the import error in src/.")]
    parent = "u0"
    for t in range(TURNS):
        call = f"toolu_{t:02d}"
        a, r = f"a{t}", f"r{t}"
        second = f"{t % 60:02d}"
        records.append(assistant(a, parent, f"msg_{t:02d}", {"type": "tool_use", "id": call, "name": "Bash",
                                                             "input": {"command": student(t)}},
                                 ts=f"2025-11-17T11:{t // 60 + 1:02d}:{second}.000Z"))
        output = (f"cat: missing_{t}.py: No such file or directory (RESULT {t})" if t % 2 == 0
                  else f"import os  # RESULT {t}")
        block = {"type": "tool_result", "tool_use_id": call, "content": output, "is_error": t % 2 == 0}
        records.append(user(r, a, [block], ts=f"2025-11-17T11:{t // 60 + 1:02d}:{second}.500Z"))
        parent = r
    return write_session(folder / "-repo", records)


def ensure_outcomes(run: Path) -> bool:
    """Give the run's failed states `metadata.outcome` and `metadata.recovery` where ingestion did not
    (before the outcome readers landed); True when ingestion had already filled them."""
    path = run / "states.jsonl"
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    if any("outcome" in (line.get("metadata") or {}) for line in lines):
        return True
    by_turn = {line["turn"]: line for line in lines}
    for line in lines:
        t = line["turn"]
        if t % 2 == 0:
            meta = line.setdefault("metadata", {})
            meta["outcome"] = {"kind": "error", "calls": [{"id": f"toolu_{t:02d}", "name": "Bash",
                                                           "kind": "error", "error": "No such file",
                                                           "exit_code": 1}]}
            if t + 1 in by_turn:
                meta["recovery"] = by_turn[t + 1]["state_id"]
        else:
            line.setdefault("metadata", {})["outcome"] = {"kind": "ok", "calls": []}
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return False
