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
from pathlib import Path
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


# --- rollouts written without a container (tests of what needs none: the plan, the dry run) -----------

CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
CANNED = {SAVE["arguments"]["command"]: "saved\n", LOOK["arguments"]["command"]: CALC,
          ASIDE["arguments"]["command"]: "orig.py\n"}


class CannedWorkspace:
    """The toy repository's commands answered as its container answers them; edits in a dict."""

    def __init__(self) -> None:
        self.files = {"calc.py": CALC}

    def run(self, command: str, timeout: int | None = None) -> Any:
        from collect.runtime import CommandResult

        return CommandResult(output=CANNED.get(command, ""), exit_code=0, timed_out=False, truncated=False)

    def read_file(self, path: str) -> tuple[bytes, Any]:
        return self.files[path].encode(), None

    def write_file(self, path: str, data: bytes, like: Any = None) -> None:
        self.files[path] = data.decode()


class ScriptedAsker:
    """The student without a server: its next step, with the usage a server would report."""

    sampling: dict[str, Any] = {"temperature": 0.5}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        from collect.reply import StudentReply

        step = next_step(messages)
        usage = {"prompt_tokens": 100 + 40 * sum(m.get("role") == "assistant" for m in messages),
                 "completion_tokens": 20}
        if isinstance(step, str):
            return StudentReply({"role": "assistant", "content": step}, finish_reason="stop", usage=usage)
        call = {"id": f"call_{len(messages)}", "type": "function",
                "function": {"name": step["name"], "arguments": json.dumps(step["arguments"])}}
        return StudentReply({"role": "assistant", "content": None, "tool_calls": [call]},
                            finish_reason="tool_calls", usage=usage)

    def history_message(self, reply: Any) -> dict[str, Any]:
        return reply.message

    def __getattr__(self, name: str) -> Any:      # what newer agents ask of a student: nothing to say
        return lambda *args, **kwargs: None


def write_rollout(folder: Path, instance_id: str, script: str, max_turns: int = 8) -> Path:
    """`<instance_id>.rollout.jsonl` as collect.run writes it, the student and container scripted."""
    import threading

    from collect.agent import run_agent
    from collect.config import load_agent_spec
    from collect.instances import image_name
    from collect.records import RolloutWriter
    from ingestion.rollout_format import FinalRecord, RolloutHeader
    from tests.collect_toy import NAMESPACE, toy_instance

    spec = load_agent_spec()
    path = folder / f"{instance_id}.rollout.jsonl"
    header = RolloutHeader(rollout_id=f"{instance_id}.collect-toy", run_id="collect-toy",
                           instance_id=instance_id, base_commit="HEAD",
                           image=image_name(instance_id, NAMESPACE, "none"),
                           student_model="student", student_url="http://127.0.0.1:9/v1",
                           sampling={"temperature": 0.5}, max_turns=max_turns, agent_version=spec.version,
                           tools=spec.tools, created_at="2026-01-01T00:00:00+00:00")
    with RolloutWriter(path) as writer:
        writer.write(header)
        result = run_agent(ScriptedAsker(), CannedWorkspace(), spec,
                           toy_instance(instance_id, script)["problem_statement"], writer, max_turns,
                           threading.Event())
        writer.write(FinalRecord(exit_status=result.exit_status, turns=result.turns, reward=0.0))
    return path
