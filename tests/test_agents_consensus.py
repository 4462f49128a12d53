"""The agents' own tools in consensus (issue #26): Codex's argv shell and apply_patch, Gemini's and
Copilot's tools, through the canonical and intent rules in configs/."""

from __future__ import annotations

from typing import Any

import pytest

from consensus.canonical import equivalent
from consensus.intent import IntentContext, intent
from ingestion.schema import Action, ToolCall


def call(name: str, **arguments: Any) -> Action:
    return Action(tool_calls=[ToolCall(id="c", name=name, arguments=arguments)])


PATCH_AB = ("*** Begin Patch\n*** Update File: /repo/b.py\n@@\n-x = 1\n+x = 2\n"
            "*** Add File: a.py\n+print('a')\n*** End Patch")
PATCH_BA = ("*** Begin Patch\n*** Add File: ./a.py\n+print('a')  \n*** Update File: b.py\n@@\n-x = 1\n"
            "+x = 2\n*** End Patch\n")


def test_apply_patch_is_per_file_edits_in_any_order() -> None:
    assert equivalent(call("apply_patch", input=PATCH_AB), call("apply_patch", input=PATCH_BA), "/repo")
    other = PATCH_BA.replace("+x = 2", "+x = 3")
    assert not equivalent(call("apply_patch", input=PATCH_AB), call("apply_patch", input=other), "/repo")


@pytest.mark.parametrize(("a", "b"), [
    (call("shell", command=["bash", "-lc", "ls  -la"], timeout_ms=1000),
     call("shell", command=["bash", "-lc", "ls -la"])),
    (call("exec_command", cmd="cd /repo && pytest -q", yield_time_ms=500),
     call("exec_command", cmd="pytest -q")),
    (call("run_shell_command", command="git status", description="check"),
     call("run_shell_command", command="git status")),
    (call("bash", command="ls", description="list"), call("bash", command="ls")),
    (call("read_file", file_path="/repo/a.py"), call("read_file", file_path="a.py")),
])
def test_exact_tier_ignores_labels_and_limits(a: Action, b: Action) -> None:
    assert equivalent(a, b, "/repo")


def test_shell_intents_across_the_agents_vocabularies() -> None:
    ctx = IntentContext("/repo", [])
    reads = [call("shell", command=["bash", "-lc", "cat a.py"]), call("exec_command", cmd="cat a.py"),
             call("run_shell_command", command="cat a.py"), call("read_file", file_path="/repo/a.py"),
             call("view", path="/repo/a.py"), call("Read", file_path="/repo/a.py")]
    assert len({intent(action, ctx) for action in reads}) == 1
    assert intent(call("exec_command", cmd="cat b.py"), ctx) != intent(reads[0], ctx)
