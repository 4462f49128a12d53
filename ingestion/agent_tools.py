"""The tools of the agents read besides Claude Code (configs/agent_tools.json): one list per trace, so
teachers answer in the vocabulary the student had (Codex's `shell` / `apply_patch`, Gemini's
`run_shell_command` / `replace`, …)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from configs import config_path
from ingestion.claude_code.tools import infer_schema
from ingestion.schema import ToolCall


@lru_cache(maxsize=1)
def _catalog() -> dict[str, Any]:
    return json.loads(config_path("agent_tools.json").read_text(encoding="utf-8"))


def agent_name(fmt: str) -> str:
    """How the system prompt names the agent of a format.

    >>> agent_name("codex"), agent_name("gemini")
    ('Codex CLI', 'Gemini CLI')
    """
    return _catalog()[fmt]["agent"]


def agent_tools(fmt: str, calls: Iterable[ToolCall]) -> list[dict[str, Any]]:
    """The tools of a trace of format `fmt`: the agent's default set (a build's replacements applied
    where the trace used them), then every other tool it called, sorted by name (a known schema, else
    one inferred from its calls).

    >>> names = lambda calls: [t["function"]["name"] for t in agent_tools("codex", calls)]
    >>> names([ToolCall(id="1", name="exec_command", arguments={"cmd": "ls"})])
    ['apply_patch', 'update_plan', 'view_image', 'exec_command']
    >>> names([ToolCall(id="1", name="mcp__x__y", arguments={"q": "a"})])[-1]
    'mcp__x__y'
    """
    entry = _catalog()[fmt]
    known: dict[str, dict[str, Any]] = entry["tools"]
    used: dict[str, list[dict[str, Any]]] = {}
    for call in calls:
        used.setdefault(call.name, []).append(call.arguments)
    replaced = {old for name in used for old in entry["replaces"].get(name, ())}
    base = [name for name in entry["default"] if name not in replaced]
    extra = sorted(name for name in used if name not in base)
    return [*(known[n] for n in base), *(known[n] if n in known else infer_schema(n, used[n]) for n in extra)]
