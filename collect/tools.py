"""The agent's two tools, `bash` and `edit`, executed against a Runtime; the edits themselves are pure."""

from __future__ import annotations

import json
from typing import Any, Protocol

from collect.runtime import CommandResult
from ingestion.rollout_format import Observation


class Workspace(Protocol):
    """What the tools need from a container (collect.runtime.Runtime; tests may pass their own)."""

    def run(self, command: str, timeout: int | None = None) -> CommandResult: ...
    def read_file(self, path: str) -> tuple[bytes, Any]: ...
    def write_file(self, path: str, data: bytes, like: Any = None) -> None: ...


class ToolError(ValueError):
    pass


def replace_once(text: str, old: str, new: str) -> str:
    """Replace the single occurrence of `old`; zero or several occurrences are the caller's mistake.

    >>> replace_once("a = 1\\nb = 1\\n", "a = 1", "a = 2")
    'a = 2\\nb = 1\\n'
    >>> replace_once("x x", "x", "y")
    Traceback (most recent call last):
    ...
    collect.tools.ToolError: old_str occurs 2 times; include more context to make it unique
    """
    if not old:
        raise ToolError("old_str is empty")
    count = text.count(old)
    if count == 0:
        raise ToolError("old_str was not found (it must match exactly, whitespace included)")
    if count > 1:
        raise ToolError(f"old_str occurs {count} times; include more context to make it unique")
    return text.replace(old, new, 1)


def parse_arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments as a dict; the wire form is a JSON string.

    >>> parse_arguments('{"command": "ls"}'), parse_arguments({"command": "ls"})
    ({'command': 'ls'}, {'command': 'ls'})
    >>> parse_arguments('{"command": ')
    Traceback (most recent call last):
    ...
    collect.tools.ToolError: arguments are not valid JSON: Expecting value at char 12
    """
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (json.JSONDecodeError, TypeError) as exc:
        reason = f"{exc.msg} at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ToolError(f"arguments are not valid JSON: {reason}") from None
    if not isinstance(value, dict):
        raise ToolError("arguments must be a JSON object")
    return value


def _string(arguments: dict[str, Any], key: str, default: str | None = None) -> str:
    value = arguments.get(key, default)
    if not isinstance(value, str):
        raise ToolError(f"`{key}` is required and must be a string")
    return value


def run_bash(workspace: Workspace, call_id: str, arguments: dict[str, Any]) -> Observation:
    result = workspace.run(_string(arguments, "command"))
    footer = (f"[timed out: the command was killed (exit code {result.exit_code})]" if result.timed_out
              else f"[exit code: {result.exit_code}]")
    output = result.output if result.output.endswith("\n") or not result.output else result.output + "\n"
    return Observation(tool_call_id=call_id, name="bash", output=output + footer,
                       exit_code=result.exit_code, timed_out=result.timed_out, truncated=result.truncated)


def run_edit(workspace: Workspace, call_id: str, arguments: dict[str, Any]) -> Observation:
    command, path = _string(arguments, "command"), _string(arguments, "path")
    if command == "create":
        workspace.write_file(path, _string(arguments, "file_text").encode())
        return Observation(tool_call_id=call_id, name="edit", output=f"Wrote {path}.")
    if command != "str_replace":
        raise ToolError(f"unknown command {command!r}; use create or str_replace")
    old, new = _string(arguments, "old_str"), _string(arguments, "new_str", "")
    try:
        data, info = workspace.read_file(path)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not UTF-8 text") from None
    workspace.write_file(path, replace_once(text, old, new).encode(), like=info)
    return Observation(tool_call_id=call_id, name="edit", output=f"Edited {path}: 1 occurrence replaced.")


TOOLS = {"bash": run_bash, "edit": run_edit}


def execute(workspace: Workspace, call: dict[str, Any]) -> Observation:
    """Run one OpenAI-form tool call; a mistake in the call becomes an error observation, never a crash."""
    call_id, function = call["id"], call.get("function") or {}
    name = function.get("name") or ""
    if name not in TOOLS:
        message = f"error: unknown tool {name!r}; the tools are {', '.join(TOOLS)}"
        return Observation(tool_call_id=call_id, name=name, output=message, error="unknown_tool")
    try:
        return TOOLS[name](workspace, call_id, parse_arguments(function.get("arguments")))
    except (ToolError, ValueError) as exc:  # ValueError: a file the runtime refuses (too big, not regular)
        return Observation(tool_call_id=call_id, name=name, output=f"error: {exc}", error="invalid_call")


def tool_message(observation: Observation) -> dict[str, Any]:
    """The observation as the message that goes back to the student: the `tool` message of its call,
    or a `user` message when the reply had no call to answer (a call left as text, a cut reply).

    >>> tool_message(Observation(tool_call_id="c1", name="bash", output="ok"))
    {'role': 'tool', 'tool_call_id': 'c1', 'content': 'ok'}
    >>> tool_message(Observation(tool_call_id=None, name="", output="error: ...", error="truncated_reply"))
    {'role': 'user', 'content': 'error: ...'}
    """
    if observation.tool_call_id is None:
        return {"role": "user", "content": observation.output}
    return {"role": "tool", "tool_call_id": observation.tool_call_id, "content": observation.output}
