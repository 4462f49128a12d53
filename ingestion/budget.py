"""Budgets (ingestion rule 10): cut oversized messages, drop the oldest turns of long prompts.

Pure functions; the caller counts what was cut.
"""

from __future__ import annotations

from typing import Any

import orjson

from ingestion.options import CHARS_PER_TOKEN


def cut_text(text: str, limit: int) -> str:
    """Keep head and tail of an oversized text, saying how much was cut.

    >>> cut_text("abcdefghij", 4)
    'ab\\n[... 6 characters cut ...]\\nij'
    >>> cut_text("short", 10)
    'short'
    """
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[len(text) - tail:]}"


def cut_value(value: Any, limit: int) -> Any:
    """`cut_text` applied to every string inside a JSON-like value (tool-call arguments).

    >>> cut_value({"content": "abcdefghij", "n": 1}, 4)["n"]
    1
    """
    if isinstance(value, str):
        return cut_text(value, limit)
    if isinstance(value, dict):
        return {key: cut_value(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [cut_value(item, limit) for item in value]
    return value


def message_chars(message: dict[str, Any]) -> int:
    """Rough size of a message as sent: its text plus its tool calls as JSON.

    >>> message_chars({"role": "user", "content": "hello"})
    5
    """
    size = len(message.get("content") or "")
    if message.get("tool_calls"):
        size += len(orjson.dumps(message["tool_calls"]))
    return size


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """Tokens of a prompt at CHARS_PER_TOKEN characters each.

    >>> estimate_tokens([{"role": "user", "content": "x" * 40}])
    10
    """
    chars = sum(message_chars(m) for m in messages)
    if tools:
        chars += len(orjson.dumps(tools))
    return chars // CHARS_PER_TOKEN


def fit_context(messages: list[dict[str, Any]], max_tokens: int, tools: list[dict[str, Any]] | None = None,
                chars: int | None = None, sizes: list[int] | None = None) -> tuple[list[dict[str, Any]], int]:
    """Drop the oldest exchanges after the first user message until the prompt fits.

    An assistant message and the tool results answering it go together, so no tool
    call is ever left without its result. Returns (messages, messages dropped).

    >>> msgs = [{"role": "system", "content": ""}, {"role": "user", "content": "task"},
    ...         {"role": "assistant", "content": "x" * 400}, {"role": "user", "content": "go on"}]
    >>> [m["role"] for m in fit_context(msgs, 50)[0]]
    ['system', 'user', 'user']
    """
    budget = max_tokens * CHARS_PER_TOKEN - (len(orjson.dumps(tools)) if tools else 0)
    if chars is not None and chars <= budget:  # the caller already knows the size: skip a pass
        return messages, 0
    if sizes is None:   # the caller may know them: measuring every message of every state is quadratic
        sizes = [message_chars(m) for m in messages]
    total = sum(sizes)
    if total <= budget:
        return messages, 0
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), 0)
    start = first_user + 1
    cut = start
    # Never drop the last message: it is what the turn answers.
    while total > budget and cut < len(messages) - 1:
        end = cut + 1
        if messages[cut].get("role") == "assistant":
            while end < len(messages) - 1 and messages[end].get("role") == "tool":
                end += 1
        total -= sum(sizes[cut:end])
        cut = end
    # A leading tool message would answer a call that is gone.
    while cut < len(messages) - 1 and messages[cut].get("role") == "tool":
        total -= sizes[cut]
        cut += 1
    return messages[:start] + messages[cut:], cut - start
