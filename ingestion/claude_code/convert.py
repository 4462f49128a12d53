"""Anthropic content blocks → OpenAI chat messages (ingestion rule 6). Pure functions."""

from __future__ import annotations

from typing import Any

from ingestion.messages import strip_blank_lines
from ingestion.schema import Action, ToolCall

IMAGE = "[image]"
DOCUMENT = "[document]"


def _block_text(block: Any) -> str | None:
    """Text of a user-side block, placeholders for media, None for what is not text."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text":
        return block.get("text") or ""
    if kind == "image":
        return IMAGE
    if kind == "document":
        return DOCUMENT
    if kind == "tool_reference":
        return f"[tool_reference: {block.get('tool_name', '')}]"
    return None


def tool_result_text(content: Any) -> str:
    """The text of a tool_result's content (a string or a list of blocks).

    >>> tool_result_text([{"type": "text", "text": "ok"}, {"type": "image", "source": {}}])
    'ok\\n[image]'
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_block_text(block) for block in content]
        return "\n".join(p for p in parts if p is not None)
    return str(content)


def user_messages(content: Any) -> list[dict[str, Any]]:
    """One user record's content → tool messages (results first), then one user message.

    >>> [m["role"] for m in user_messages([{"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
    ...                                    {"type": "text", "text": "[Request interrupted by user]"}])]
    ['tool', 'user']
    """
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    if not isinstance(content, list):
        return []
    tools: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            tools.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""),
                          "content": tool_result_text(block.get("content"))})
            continue
        text = _block_text(block)
        if text is not None:
            texts.append(text)
    if texts:
        tools.append({"role": "user", "content": "\n".join(texts)})
    return tools


def assistant_action(blocks: list[Any]) -> Action:
    """Merged assistant blocks → Action; thinking kept apart, redacted thinking dropped.

    >>> a = assistant_action([{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Hi"},
    ...                       {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}])
    >>> (a.content, a.tool_calls[0].arguments, a.thinking)
    ('Hi', {'command': 'ls'}, 'hmm')
    """
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            texts.append(block["text"])
        elif kind == "thinking" and block.get("thinking"):
            thinking.append(block["thinking"])
        elif kind == "tool_use":
            arguments = block.get("input")
            calls.append(ToolCall(id=str(block.get("id") or f"call_{len(calls)}"),
                                  name=str(block.get("name") or "unknown"),
                                  arguments=arguments if isinstance(arguments, dict) else {}))
    return Action(content=strip_blank_lines("\n\n".join(texts)), tool_calls=calls,
                  thinking="\n\n".join(thinking) if thinking else None)


def is_turn(action: Action) -> bool:
    """A turn says something or calls a tool; thinking alone is not a turn (rule 4).

    >>> is_turn(Action(content="  ")), is_turn(Action(content="ok"))
    (False, True)
    """
    return bool(action.content.strip() or action.tool_calls)
