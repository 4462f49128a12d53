"""Tool schemas for a trace (ingestion rule 8): configs first, recorded shapes win, else inferred."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from configs import config_path
from ingestion.schema import ToolCall


@lru_cache(maxsize=1)
def known_tools() -> tuple[dict[str, dict[str, Any]], tuple[str, ...]]:
    """Claude Code's built-in tool schemas by name, and the set offered at every state."""
    data = json.loads(config_path("claude_code_tools.json").read_text(encoding="utf-8"))
    return data["tools"], tuple(data["default"])


_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array", dict: "object"}


def infer_schema(name: str, calls: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """An OpenAI tool schema from the arguments a tool was called with.

    >>> s = infer_schema("mcp__gh__issue", [{"repo": "a", "n": 1}, {"repo": "b"}])
    >>> s["function"]["parameters"]["properties"]["n"], s["function"]["parameters"]["required"]
    ({'type': 'integer'}, ['repo'])
    """
    types: dict[str, set[str]] = {}
    seen: list[set[str]] = []
    for arguments in calls:
        seen.append(set(arguments))
        for key, value in arguments.items():
            types.setdefault(key, set()).add(_JSON_TYPES.get(type(value), "string"))
    properties = {key: {"type": sorted(kinds)[0]} if len(kinds) == 1 else {"type": sorted(kinds)}
                  for key, kinds in types.items()}
    required = sorted(set.intersection(*seen)) if seen else []
    return {"type": "function", "function": {
        "name": name, "description": f"{name} (schema inferred from the calls in this session)",
        "parameters": {"type": "object", "properties": properties, "required": required}}}


def recorded_tools(shapes: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The tools a session recorded (api-request-shape, CLI 2.1.3xx), as one list: every name in the
    order it first appears, with the schema it was first recorded with.

    >>> a = {"type": "function", "function": {"name": "Bash"}}
    >>> b = {"type": "function", "function": {"name": "Read"}}
    >>> [t["function"]["name"] for t in recorded_tools([[a], [b, a]])]
    ['Bash', 'Read']
    """
    tools: dict[str, dict[str, Any]] = {}
    for shape in shapes:
        for tool in shape:
            tools.setdefault(tool["function"]["name"], tool)
    return list(tools.values())


def trace_tools(calls: Iterable[ToolCall],
                recorded: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The tools a trace can use, one list for all its states (they are part of every request's
    cacheable prefix): the session's recorded list, else the default set; then every other tool the
    trace called, sorted by name (a known schema, else one inferred from its calls).

    >>> names = [t["function"]["name"] for t in trace_tools([ToolCall(id="1", name="mcp__x__y")])]
    >>> names[0], names[-1]
    ('Bash', 'mcp__x__y')
    >>> recorded = [{"type": "function", "function": {"name": "Write"}}]
    >>> [t["function"]["name"] for t in trace_tools([ToolCall(id="1", name="Bash")], recorded)]
    ['Write', 'Bash']
    """
    known, default = known_tools()
    used: dict[str, list[dict[str, Any]]] = {}
    for call in calls:
        used.setdefault(call.name, []).append(call.arguments)
    base = recorded if recorded else [known[n] for n in default]
    names = {tool["function"]["name"] for tool in base}
    extra = [known[n] if n in known else infer_schema(n, used[n]) for n in sorted(used) if n not in names]
    return [*base, *extra]
