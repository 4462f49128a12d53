"""A proposal must use the tools the state offers: a call to a tool not in the state's `tools`, or one
that lacks an argument the tool's schema requires, makes the proposal invalid. Invalid proposals are
screened out before any vote (they become no vote, with the reason), so they are never `chosen`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ingestion.schema import Action, Proposal

INVALID = "invalid_proposal"  # the prefix of a screened proposal's `error`


def _schemas(tools: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """name → parameters schema, for OpenAI (`function.parameters`) and Anthropic (`input_schema`) forms."""
    out = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        name = function.get("name")
        if isinstance(name, str):
            schema = function.get("parameters", function.get("input_schema"))
            out[name] = schema if isinstance(schema, dict) else {}
    return out


def invalid_reason(action: Action, tools: Sequence[dict[str, Any]]) -> str | None:
    """Why the action cannot run in a state with these tools (`unknown_tool` / `missing_argument`), or None.

    >>> tools = [{"type": "function", "function": {"name": "Bash", "parameters": {
    ...     "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
    >>> call = lambda name, **kw: Action(tool_calls=[{"id": "1", "name": name, "arguments": kw}])
    >>> invalid_reason(call("Bash", command="ls"), tools), invalid_reason(call("shell", command="ls"), tools)
    (None, 'unknown_tool: shell')
    >>> invalid_reason(call("Bash", cmd="ls"), tools), invalid_reason(Action(content="Done."), tools)
    ('missing_argument: Bash.command', None)
    """
    if not action.tool_calls:
        return None
    schemas = _schemas(tools)
    for call in action.tool_calls:
        if call.name not in schemas:
            return f"unknown_tool: {call.name}"
        required = schemas[call.name].get("required") or []
        missing = [name for name in required if isinstance(name, str) and name not in call.arguments]
        if missing:
            return f"missing_argument: {call.name}.{missing[0]}"
    return None


def screen(proposals: Sequence[Proposal], tools: Sequence[dict[str, Any]]) -> list[Proposal]:
    """The proposals with every invalid action turned into no vote (`error` says why); pure and
    idempotent, so the run and `replay.ablate` can both apply it. A state without tool schemas
    (none recorded) checks nothing.

    >>> p = Proposal(state_id="s", teacher="a", model="m",
    ...              action=Action(tool_calls=[{"id": "1", "name": "shell", "arguments": {}}]))
    >>> tools = [{"type": "function", "function": {"name": "Bash", "parameters": {}}}]
    >>> screened = screen([p], tools)
    >>> screened[0].action, screened[0].error
    (None, 'invalid_proposal: unknown_tool: shell')
    """
    if not tools:
        return list(proposals)
    out = []
    for proposal in proposals:
        reason = invalid_reason(proposal.action, tools) if proposal.action is not None else None
        if reason is None:
            out.append(proposal)
        else:
            out.append(proposal.model_copy(update={"action": None, "error": f"{INVALID}: {reason}"}))
    return out


def invalid_reasons(proposals: Sequence[Proposal]) -> dict[str, int]:
    """Screened proposals counted by reason kind (`unknown_tool`, `missing_argument`).

    >>> error = "invalid_proposal: unknown_tool: x"
    >>> invalid_reasons([Proposal(state_id="s", teacher="a", model="m", error=error)])
    {'unknown_tool': 1}
    """
    counts: dict[str, int] = {}
    for proposal in proposals:
        if proposal.error and proposal.error.startswith(INVALID + ": "):
            kind = proposal.error[len(INVALID) + 2:].split(":", 1)[0]
            counts[kind] = counts.get(kind, 0) + 1
    return counts
