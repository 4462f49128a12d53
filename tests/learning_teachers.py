"""Loopback teachers for the learning bench (#57): one that knows each family instance's fix, and the
no-signal control. Both are responders for tests/llm_server.LLMServer (real HTTP on 127.0.0.1).

- `FixingTeacher`: finds the instance (tests/task_family.py) whose problem statement the request holds and
  works it as a strong teacher would, step by step after what the history shows done: read the file the
  problem names (`cat F`), replace the buggy snippet (`edit str_replace`), run the tests
  (`python3 -m pytest -q`), then say it is fixed (no tool call: the rollout ends).
- `EchoTeacher` (no signal): answers, at a state of a training instance, exactly the student's own action
  there, read from the states.jsonl files replay.run writes under `root` (matched on the request's
  messages). Consensus then equals the student's action: every such state is `agree`, and a DPO run makes
  no pair. At a held-out instance's state it answers as `FixingTeacher`, so the held-out yardstick is the
  same as the real pool's and the control changes only what the student is trained on.

The third arm, the real pool with chosen and rejected swapped, is `replay.run --swap-pairs`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from tests.llm_server import Reply, chat_completion
from tests.task_family import Task, tasks

TEST_COMMAND = "python3 -m pytest -q"


def _text(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def _calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls of the history's assistant turns, arguments as objects."""
    out = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    arguments = {}
            out.append({"name": function.get("name"), "arguments": arguments or {}})
    return out


class FixingTeacher:
    """The fix of the family instance a request is about, one step at a time."""

    def __init__(self, prompt_tokens: int = 900, completion_tokens: int = 30) -> None:
        # The file and the function the statement names find the instance: the call it quotes may hold
        # words that pseudonymisation replaces (a name in prose, #58).
        self.by_statement = {(f"In {task.path},", f"Please fix `{task.function}`."): task for task in tasks()}
        self.tokens = prompt_tokens, completion_tokens

    def task(self, messages: list[dict[str, Any]]) -> Task | None:
        text = _text(messages)
        return next((task for marks, task in self.by_statement.items()
                     if all(json.dumps(mark, ensure_ascii=False)[1:-1] in text for mark in marks)), None)

    @staticmethod
    def step(task: Task, messages: list[dict[str, Any]]) -> list[dict[str, Any]] | str:
        """The next step of the fix after the history's own calls."""
        calls = _calls(messages)
        edits = [i for i, c in enumerate(calls)
                 if c["name"] == "edit" and c["arguments"].get("new_str") == task.right]
        edited = bool(edits)
        read = any(c["name"] == "bash" and task.path in str(c["arguments"].get("command", "")) for c in calls)
        tested = edited and any(c["name"] == "bash" and "pytest" in str(c["arguments"].get("command", ""))
                                for c in calls[edits[-1]:])
        if tested:
            return f"Fixed `{task.function}` in {task.path}: the tests pass."
        if edited:
            return [{"name": "bash", "arguments": {"command": TEST_COMMAND}}]
        if read:
            return [{"name": "edit", "arguments": {"command": "str_replace", "path": task.path,
                                                   "old_str": task.wrong, "new_str": task.right}}]
        return [{"name": "bash", "arguments": {"command": f"cat {task.path}"}}]

    def answer(self, request: dict[str, Any], step: list[dict[str, Any]] | str) -> Reply:
        model = request.get("model", "teacher")
        prompt, completion = self.tokens
        content, calls = (step, None) if isinstance(step, str) else ("", step)
        return Reply(chat_completion(content, calls, model=model, prompt_tokens=prompt,
                                     completion_tokens=completion))

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages") or []
        task = self.task(messages)
        if task is None:   # not a family instance (the start-up probe, another source): a plain look
            return self.answer(request, [{"name": "bash", "arguments": {"command": "ls"}}])
        return self.answer(request, self.step(task, messages))


def message_key(messages: list[dict[str, Any]]) -> str:
    """A state's messages as the teacher request carries them, compared by role, text and calls.

    >>> call = {"id": "c", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    >>> message_key([{"role": "assistant", "content": None, "tool_calls": [call]}]) == message_key(
    ...     [{"role": "assistant", "content": "", "tool_calls": [{**call, "function": {
    ...         "name": "bash", "arguments": {"command": "ls"}}}]}])
    True
    """
    def text(content: Any) -> str:
        if isinstance(content, list):
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return content or ""

    shape = [[m.get("role"), text(m.get("content")),
              [[c["name"], json.dumps(c["arguments"], sort_keys=True)] for c in _calls([m])]]
             for m in messages]
    return hashlib.sha256(json.dumps(shape, ensure_ascii=False).encode()).hexdigest()


class EchoTeacher(FixingTeacher):
    """No signal: the student's own action at a training state; the fix at a held-out instance's."""

    def __init__(self, root: Path, held_out: set[str]) -> None:
        super().__init__()
        self.root, self.held_out = root, held_out
        self.actions: dict[str, dict[str, Any]] = {}
        self.misses = 0
        self.lock = threading.Lock()

    def _index(self) -> None:
        from ingestion.store import StoreError, load_states
        from teachers.request import to_api_messages

        for path in sorted(self.root.rglob("states.jsonl")):
            try:
                for state in load_states(path):
                    action = state.student_action.model_dump(mode="json")
                    self.actions[message_key(to_api_messages(state.messages))] = action
            except (StoreError, OSError, ValueError):
                continue   # a run folder swapped in or removed while read: the next miss reads again

    def student_action(self, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
        key = message_key(messages)
        with self.lock:
            if key not in self.actions:
                self._index()   # a new run's states: read again
            return self.actions.get(key)

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages") or []
        task = self.task(messages)
        if task is not None and task.instance_id in self.held_out:
            return self.answer(request, self.step(task, messages))
        action = self.student_action(messages)
        if action is None:
            with self.lock:
                self.misses += 1
            return self.answer(request, "no state matched this request")
        calls = [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
                 for c in action["tool_calls"]]
        return self.answer(request, calls or action.get("content") or "")
