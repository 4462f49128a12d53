"""Message fixes that real chat templates need (issue #19 item 3), applied at ingestion so teachers
and the dataset see the same messages. Pure functions, the same result for the same message in every
state of a trace (decision C1).

- Assistant text loses its leading and trailing blank lines: a completion starting with "\\n\\n" merges
  with the generation prompt's last newline into one token under Qwen-style tokenizers, so the prompt's
  tokens stop being a prefix of prompt + completion.
- Consecutive user messages are merged (texts joined by a blank line) so roles alternate: Gemma 3 and
  Mistral templates raise on two user turns in a row ("[Request interrupted by user]" then the next
  prompt is the usual case).
- Tool messages carry the `name` of the tool they answer (the Hermes template and TRL's tool examples
  require it); set where Claude Code results are paired with their calls, and by `fix_messages` for
  collected rollouts (which record each request whole).
"""

from __future__ import annotations

import re
from typing import Any

_LEADING_BLANK = re.compile(r"\A(?:[^\S\n]*\n)+")
_TRAILING_BLANK = re.compile(r"(?:\n[^\S\n]*)+\Z")
USER_JOINER = "\n\n"


def strip_blank_lines(text: str) -> str:
    """Drop blank lines at the start and end of a text; indentation of the first line stays.

    >>> strip_blank_lines("\\n\\n  \\n    code()\\nmore\\n\\n")
    '    code()\\nmore'
    >>> strip_blank_lines("plain")
    'plain'
    """
    if not text or (text[0] not in " \t\n" and text[-1] not in " \t\n"):
        return text
    return _TRAILING_BLANK.sub("", _LEADING_BLANK.sub("", text))


def is_user(message: dict[str, Any]) -> bool:
    return message.get("role") == "user"


def join_users(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """One user message from two in a row, texts joined by a blank line.

    >>> join_users({"role": "user", "content": "[Request interrupted by user]"},
    ...            {"role": "user", "content": "try again"})["content"]
    '[Request interrupted by user]\\n\\ntry again'
    """
    texts = [t for t in (first.get("content") or "", second.get("content") or "") if t]
    return {**first, "content": USER_JOINER.join(texts)}


def merge_user_runs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with every run of consecutive user messages merged into one (a new list; messages
    that are not merged are the same objects).

    >>> msgs = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
    ...         {"role": "assistant", "content": "c"}, {"role": "user", "content": "d"}]
    >>> [m["content"] for m in merge_user_runs(msgs)]
    ['a\\n\\nb', 'c', 'd']
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and is_user(message) and is_user(out[-1]):
            out[-1] = join_users(out[-1], message)
        else:
            out.append(message)
    return out


def name_tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool messages without a `name` get the name of the call they answer (from the assistant
    messages before them); other messages are the same objects.

    >>> call = {"id": "c", "function": {"name": "bash"}}
    >>> msgs = [{"role": "assistant", "content": "", "tool_calls": [call]},
    ...         {"role": "tool", "tool_call_id": "c", "content": "ok"}]
    >>> name_tool_messages(msgs)[1]["name"]
    'bash'
    """
    names: dict[str, str] = {}
    out = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            names[str(call.get("id"))] = str((call.get("function") or {}).get("name") or "")
        if message.get("role") == "tool" and "name" not in message and message.get("tool_call_id") in names:
            message = {**message, "name": names[message["tool_call_id"]]}
        out.append(message)
    return out


def fix_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """All three fixes, for messages read whole (collected rollouts record each request as sent).

    >>> msgs = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
    ...         {"role": "assistant", "content": "\\n\\nc"}]
    >>> [m["content"] for m in fix_messages(msgs)]
    ['a\\n\\nb', 'c']
    """
    fixed = [{**m, "content": strip_blank_lines(m["content"])}
             if m.get("role") == "assistant" and isinstance(m.get("content"), str)
             and m["content"] != strip_blank_lines(m["content"]) else m for m in messages]
    return merge_user_runs(name_tool_messages(fixed))
