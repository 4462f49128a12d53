"""The synthetic system prompt (ingestion rule 7): sessions carry none of their own."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jinja2

from configs import config_path


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False)
    return env.from_string(config_path("system_prompt.j2").read_text(encoding="utf-8"))


DEFAULT_AGENT = "Claude Code"


@lru_cache(maxsize=4096)
def _render(cwd: str, git_branch: str, date: str, version: str, tool_names: tuple[str, ...],
            agent: str = DEFAULT_AGENT) -> str:
    return _template().render(cwd=cwd, git_branch=git_branch, date=date, version=version,
                              tool_names=tool_names, agent=agent).strip()


def trace_environment(envelope: dict[str, Any]) -> dict[str, Any]:
    """What the system prompt says about a trace (cwd, branch, date, version), from the record of its
    first turn. One per trace, never per state: each request of a trace must extend the one before it
    exactly (providers cache prompts by prefix), and a date or branch that moves mid-session would change
    the first message of every later request.

    >>> trace_environment({"cwd": "/repo", "gitBranch": "main", "timestamp": "2025-06-14T23:42:08Z"})
    {'cwd': '/repo', 'git_branch': 'main', 'timestamp': '2025-06-14T23:42:08Z', 'version': None}
    """
    return {"cwd": envelope.get("cwd"), "git_branch": envelope.get("gitBranch"),
            "timestamp": envelope.get("timestamp"), "version": envelope.get("version")}


def system_message(metadata: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, str]:
    """The system message for a trace, from its cwd, branch, date, version (`trace_environment`) and tools;
    `metadata["agent"]` names the agent that wrote the trace (Claude Code unless said).

    >>> system_message({"cwd": "/repo", "timestamp": "2025-06-14T23:42:08Z"}, [])["content"].count("/repo")
    1
    >>> system_message({"agent": "Codex CLI"}, [])["content"].startswith("You are Codex CLI,")
    True
    """
    names = tuple(t["function"]["name"] for t in tools)
    content = _render(metadata.get("cwd") or "", metadata.get("git_branch") or "",
                      (metadata.get("timestamp") or "")[:10], metadata.get("version") or "", names,
                      metadata.get("agent") or DEFAULT_AGENT)
    return {"role": "system", "content": content}
