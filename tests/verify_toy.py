"""Toy pairs for `replay.verify`: a scripted student whose next step depends on what it has seen, and
scripted teachers that agree with it everywhere but at one state of each rollout.

The student (the same policy plays the rollouts and every branch): once an edit of calc.py went through
it says it is done; once it has seen `return a - b` it makes the fix; otherwise it plays its script, and
when the script is over it gives up. Each rollout copies calc.py aside first (turn 0: a restore must run
it again, or `ls /tmp` says otherwise), then its turn 1 is the state the teachers disagree at:

| script | the student's turn 1 | the teachers' turn 1 | the pair comes out |
|---|---|---|---|
| `va` | `ls /tmp`: nothing seen, gives up (0) | `cat calc.py`: sees the bug, fixes it (1) | verified |
| `vb` | `cat calc.py` (1) | `ls /tmp` (0) | flipped |
| `vc` | `cat calc.py` (1) | `grep` for the bug: sees it too (1) | tied |
"""

from __future__ import annotations

import json
from typing import Any

from tests.llm_server import Reply, chat_completion

SAVE = {"name": "bash", "arguments": {"command": "cp calc.py /tmp/orig.py && echo saved"}}
LOOK = {"name": "bash", "arguments": {"command": "cat calc.py"}}
ASIDE = {"name": "bash", "arguments": {"command": "ls /tmp"}}
GREP = {"name": "bash", "arguments": {"command": "grep -rn 'a - b' --include=*.py ."}}
FIX = {"name": "edit", "arguments": {"command": "str_replace", "path": "calc.py",
                                     "old_str": "def add(a, b):\n    return a - b",
                                     "new_str": "def add(a, b):\n    return a + b"}}
SCRIPTS = {"va": [SAVE, ASIDE], "vb": [SAVE, LOOK], "vc": [SAVE, LOOK]}
TEACHERS_AT_1 = {"va": LOOK, "vb": ASIDE, "vc": GREP}
EXPECTED = {"va": "verified", "vb": "flipped", "vc": "tied"}
DONE, GIVE_UP = "Fixed: add() adds now.", "Nothing to fix."


def script_of(messages: list[dict[str, Any]]) -> str | None:
    text = json.dumps(messages[:2])
    return next((name for name in SCRIPTS if f"[script: {name}]" in text), None)


def next_step(messages: list[dict[str, Any]], scripts: dict[str, list[Any]] | None = None) -> str | dict:
    """The student's next step: a final text or one tool call."""
    scripts = scripts or SCRIPTS
    seen = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
    if any(text.startswith("Edited calc.py") for text in seen):
        return DONE
    if any("return a - b" in text for text in seen):
        return FIX
    name = script_of(messages)
    turn = sum(m.get("role") == "assistant" for m in messages)
    script = scripts.get(name or "", [])
    return script[turn] if turn < len(script) else GIVE_UP


def student_policy(scripts: dict[str, list[Any]] | None = None) -> Any:
    """The student as tests/vllm_server.py's model: the text it generates (reasoning first)."""
    from tests.collect_toy import READY
    from tests.vllm_server import assistant_text

    def policy(request: dict[str, Any]) -> str:
        messages = request.get("messages") or []
        if "connectivity check" in json.dumps(messages[:2]):
            return assistant_text("", READY)
        step = next_step(messages, scripts)
        think = f"Turn {sum(m.get('role') == 'assistant' for m in messages)}."
        if isinstance(step, str):
            return assistant_text(step, reasoning=think)
        return assistant_text("", [step], reasoning=think)

    return policy


def teacher(body: dict[str, Any]) -> Reply:
    """A teacher: the student's own next step everywhere, but the other action at turn 1."""
    messages = body.get("messages") or []
    name = script_of(messages)
    turn = sum(m.get("role") == "assistant" for m in messages)
    step = TEACHERS_AT_1[name] if name and turn == 1 else next_step(messages)
    model = body.get("model", "t")
    if isinstance(step, str):
        return Reply(chat_completion(step, model=model))
    return Reply(chat_completion(tool_calls=[step], model=model))
