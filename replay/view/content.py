"""What a state page shows, as plain JSON data: messages, actions, a diff. Pure.

Nothing here builds HTML: `assets/state.js` draws these items with `textContent`, so session text
(untrusted) is always text. Long texts are cut to head + tail so that no page grows past its budget.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from typing import Any

import orjson

MAX_TEXT = 20_000             # characters of one message or argument shown
PAGE_BUDGET = 1_200_000       # characters of context on one page (the page stays under 2 MB)


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """Head and tail of a long text, with a marker saying how much was left out.

    >>> cut("abcdefghij", 6)
    'abc\\n[… 5 characters not shown …]\\nij'
    >>> cut("short", 6)
    'short'
    """
    if len(text) <= limit:
        return text
    head, tail = limit // 2, limit - limit // 2 - 1
    return f"{text[:head]}\n[… {len(text) - head - tail:,} characters not shown …]\n{text[-tail:]}"


def pretty(value: Any) -> str:
    """Arguments as indented JSON (a string that is not JSON stays as it is).

    >>> print(pretty({"command": "ls"}))
    {
      "command": "ls"
    }
    >>> pretty('not json')
    'not json'
    """
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    except TypeError:         # what orjson refuses (integers past 64 bits, odd keys)
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def content_text(content: Any) -> str:
    """Chat `content` (a string or a list of parts) as text; non-text parts become a placeholder.

    >>> content_text([{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {}}])
    'see\\n[image_url]'
    >>> content_text(None)
    ''
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text", "") if isinstance(part, dict) and part.get("type") == "text"
                 else f"[{part.get('type', 'part')}]" if isinstance(part, dict) else str(part)
                 for part in content]
        return "\n".join(parts)
    return json.dumps(content)


def message_item(message: dict[str, Any]) -> tuple[list[Any], int]:
    """A chat message of the context as a display item, [role, text, note, [[tool, arguments], ...]],
    and its size in characters (what a page's budget counts).

    >>> message_item({"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "type": "function",
    ...     "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}]})
    (['assistant', 'x', '', [['Bash', '{\\n  "command": "ls"\\n}']]], 26)
    """
    calls = [[str(function.get("name", "?")), cut(pretty(function.get("arguments", {})))]
             for call in message.get("tool_calls") or () if isinstance(call, dict)
             for function in (call.get("function") or {},)]
    text = cut(content_text(message.get("content")))
    size = len(text) + sum(len(name) + len(arguments) for name, arguments in calls)
    note = str(message.get("tool_call_id") or message.get("name") or "")
    return [str(message.get("role", "?")), text, note, calls], size


def action_item(action: dict[str, Any] | None, note: str = "", error: str | None = None) -> list[Any]:
    """An action (the student's, a teacher's, the consensus: an Action as JSON) as a display item; a failed
    answer shows its error.

    >>> action_item({"content": "<b>", "tool_calls": [{"name": "Read", "arguments": {"file_path": "a"}}]},
    ...             "k")
    ['assistant', '<b>', 'k', [['Read', '{\\n  "file_path": "a"\\n}']]]
    >>> action_item(None, "a", "rate_limit")
    ['assistant', 'no answer: rate_limit', 'a', []]
    """
    if action is None:
        return ["assistant", f"no answer: {error or 'unknown'}", note, []]
    calls = action.get("tool_calls") or ()
    if not calls:
        return ["assistant", cut(action.get("content") or ""), note, []]
    # The teachers of a group gave the same action but for the calls' ids: each is prepared once.
    key = [[call.get("name", "?"), call.get("arguments", {})] for call in calls]
    text, shown = _shown_calls(orjson.dumps([action.get("content") or "", key]))
    return ["assistant", text, note, shown]


@lru_cache(maxsize=4096)
def _shown_calls(key: bytes) -> tuple[str, list[list[str]]]:
    content, calls = orjson.loads(key)
    return cut(content), [[str(name), cut(pretty(arguments))] for name, arguments in calls]


def call_lines(action: dict[str, Any]) -> list[str]:
    """An action's tool calls (an Action as JSON) as JSON lines, the form the diff compares.

    >>> call_lines({"tool_calls": [{"id": "1", "name": "Read", "arguments": {"file_path": "a"}}]})[:3]
    ['[', '  {', '    "arguments": {']
    >>> call_lines({"content": "All  done", "tool_calls": []})
    ['(no tool call) All done']
    """
    calls = [{"name": call.get("name"), "arguments": call.get("arguments")}
             for call in action.get("tool_calls") or ()]
    if not calls:
        return [f"(no tool call) {' '.join((action.get('content') or '').split())}"[:MAX_TEXT]]
    try:
        text = orjson.dumps(calls, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    except TypeError:         # what orjson refuses (integers past 64 bits, odd keys)
        text = json.dumps(calls, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return cut(text).splitlines()


def call_diff(chosen: dict[str, Any], rejected: dict[str, Any]) -> list[list[str]]:
    """Line diff of the tool calls, chosen (`+`) against rejected (`-`): [kind, line] with kind one of
    same, add, del.

    The lines both share at the start and at the end are kept as they are, and a middle with no line in
    common is a plain replacement: only a middle that shares lines goes to difflib (most pairs differ in
    one argument, and difflib's setup is most of the cost of a short diff).

    >>> bash = lambda c: {"tool_calls": [{"id": "1", "name": "Bash", "arguments": {"command": c}}]}
    >>> [d for d in call_diff(bash("pytest"), bash("ls")) if d[0] != "same"]
    [['del', '      "command": "ls"'], ['add', '      "command": "pytest"']]
    >>> call_diff({"content": "b"}, {"content": "a"})
    [['del', '(no tool call) a'], ['add', '(no tool call) b']]
    """
    old, new = call_lines(rejected), call_lines(chosen)
    head = 0
    while head < len(old) and head < len(new) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < len(old) - head and tail < len(new) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    out = [["same", line] for line in old[:head]]
    old_mid, new_mid = old[head:len(old) - tail], new[head:len(new) - tail]
    if set(old_mid).isdisjoint(new_mid):
        out += [["del", line] for line in old_mid] + [["add", line] for line in new_mid]
    else:
        matcher = difflib.SequenceMatcher(None, old_mid, new_mid, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                out += [["same", line] for line in old_mid[i1:i2]]
            else:
                out += [["del", line] for line in old_mid[i1:i2]] + [["add", line] for line in new_mid[j1:j2]]
    return out + [["same", line] for line in old[len(old) - tail:]]
