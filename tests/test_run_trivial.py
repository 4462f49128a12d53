"""Issue #19 item 1, end to end: over the fixtures, two loopback teachers copy the student's action
with only trivial differences (a trailing `;`, `cd <cwd> &&`, a Write's trailing newline, Read's
`offset: 1`, Grep's `-n: true`, TodoWrite's `activeForm`, parallel calls reordered, other ids and
descriptions). Such differences must not become pairs: at most 2% of the states with a consensus.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ingestion.schema import Action, TraceState
from ingestion.store import load_states
from replay.run import main
from tests.llm_server import LLMServer, Reply, chat_completion


def state_key(messages: list[dict[str, Any]]) -> tuple[int, str]:
    """Which state a request is: its length and its last message (a tool result's id, else its text)."""
    last = messages[-1]
    return len(messages), str(last.get("tool_call_id") or last.get("content"))[:200]


def vary(action: Action, cwd: str, style: int) -> dict[str, Any]:
    """The student's action written differently, trivially: the chat.completion a copying teacher sends."""
    calls = []
    for number, call in enumerate(action.tool_calls):
        arguments = dict(call.arguments)
        if call.name == "Bash" and isinstance(arguments.get("command"), str):
            command = arguments["command"].rstrip()
            command = command + ";" if style == 0 and not command.endswith(("\\;", ";", "EOF")) else command
            arguments["command"] = f"cd {cwd} && {command}" if style == 1 and "\n" not in command else command
            arguments["description"] = f"copied by teacher {style}"
        elif call.name == "Write" and isinstance(arguments.get("content"), str):
            content = arguments["content"]
            arguments["content"] = content[:-1] if content.endswith("\n") else content + "\n"
        elif call.name == "Read" and "offset" not in arguments:
            arguments["offset"] = 1
        elif call.name == "Grep" and "-n" not in arguments:
            arguments["-n"] = True
        elif call.name == "TodoWrite" and isinstance(arguments.get("todos"), list):
            arguments["todos"] = [{**todo, "activeForm": f"Working on it ({style})"} if isinstance(todo, dict)
                                  else todo for todo in arguments["todos"]]
        calls.append({"id": f"call_{style}_{number}", "name": call.name, "arguments": arguments})
    if style == 1:
        calls.reverse()  # the same parallel calls in another order
    if not calls:
        content = action.content.upper() if style == 0 else f"  {action.content}\n"
        return chat_completion(content, model=f"copy{style}")
    return chat_completion(action.content, tool_calls=calls, model=f"copy{style}")


def test_copies_with_trivial_differences_are_not_pairs(fixtures_root: Path, tmp_path: Path) -> None:
    states: dict[tuple[int, str], TraceState] = {}
    # The states as the run sends them (redacted and pseudonymised, issue #50): a dry run's. The teachers
    # copy the student's action with its placeholders, so a pair here would be one that turned on them.
    assert main(["--source", str(fixtures_root), "--out", str(tmp_path / "dry"), "--dry-run"]) == 0
    for state in load_states(tmp_path / "dry"):
        states[state_key(state.messages)] = state
    missed: list[tuple[int, str]] = []

    def respond(body: dict[str, Any]) -> Reply:
        key = state_key(body["messages"])
        state = states.get(key)
        if state is None:
            missed.append(key)
            return Reply(chat_completion("?", model=body["model"]))
        style = int(body["model"][-1])
        return Reply(vary(state.student_action, state.metadata.get("cwd") or "/", style))

    reports = {}
    with LLMServer(respond) as server:
        teachers = ",".join(f"copy{n}=openai/copy{n}@{server.url}" for n in (0, 1))
        for match in ("exact", "intent"):
            out = tmp_path / match
            assert main(["--source", str(fixtures_root), "--out", str(out), "--teachers", teachers,
                         "--cache", str(tmp_path / "cache.sqlite"), "--match", match]) == 0
            reports[match] = json.loads((out / "report.json").read_text())
    assert len(missed) <= 0.01 * 2 * reports["exact"]["states"], missed[:5]
    for match, report in reports.items():
        reached = report["consensus"]["reached"]
        share = report["pairs"] / reached
        print(f"\n--match {match}: {report['pairs']} pairs of {reached} states with a consensus "
              f"({share:.1%}); {report['consensus']}")
        assert reached >= 0.8 * report["states"]
        assert share <= 0.02
