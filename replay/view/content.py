"""What a state page shows, as plain data for the templates: messages, actions, a diff. Pure.

Nothing here builds HTML: the templates do, with jinja2's autoescape on, so session text (untrusted)
is always text. Long texts are cut to head + tail so that no page grows past its budget.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import orjson

from ingestion.schema import Action

MAX_TEXT = 20_000             # characters of one message or argument shown
PAGE_BUDGET = 1_200_000       # characters of context on one page (the page stays under 2 MB)
RECENT = 4                    # messages shown open; older ones are folded


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


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str            # pretty JSON, cut


@dataclass(frozen=True)
class Shown:
    """One message or action as the page shows it (hashable: a trace's pages share their messages)."""

    role: str
    text: str = ""
    calls: tuple[Call, ...] = ()
    note: str = ""            # tool_call_id of a tool result, a teacher's name, an error

    @cached_property
    def size(self) -> int:
        return len(self.text) + sum(len(c.arguments) + len(c.name) for c in self.calls)


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


def shown_message(message: dict[str, Any]) -> Shown:
    """A chat message of the context, ready to show.

    >>> m = shown_message({"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "type":
    ...     "function", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}]})
    >>> m.role, m.text, m.calls[0].name
    ('assistant', 'x', 'Bash')
    """
    try:
        return _shown_once(orjson.dumps(message))
    except TypeError:
        return _shown(message)


@lru_cache(maxsize=8192)
def _shown_once(raw: bytes) -> Shown:
    """The pages of one trace share most of their context: each message is prepared once."""
    return _shown(orjson.loads(raw))


def _shown(message: dict[str, Any]) -> Shown:
    calls = tuple(Call(name=str((call.get("function") or {}).get("name", "?")),
                       arguments=cut(pretty((call.get("function") or {}).get("arguments", {}))))
                  for call in message.get("tool_calls") or [] if isinstance(call, dict))
    return Shown(role=str(message.get("role", "?")), text=cut(content_text(message.get("content"))),
                 calls=calls, note=str(message.get("tool_call_id") or message.get("name") or ""))


def shown_action(action: Action | None, note: str = "", error: str | None = None) -> Shown:
    """An action (the student's, a teacher's, the consensus) ready to show; a failed answer shows its error.

    >>> shown_action(None, "a", "rate_limit").text
    'no answer: rate_limit'
    """
    if action is None:
        return Shown(role="assistant", text=f"no answer: {error or 'unknown'}", note=note)
    calls = tuple(Call(name=call.name, arguments=cut(pretty(call.arguments))) for call in action.tool_calls)
    return Shown(role="assistant", text=cut(action.content), calls=calls, note=note)


def fold(messages: list[dict[str, Any]], recent: int = RECENT,
         budget: int = PAGE_BUDGET) -> tuple[Shown | None, list[Shown], list[Shown], int]:
    """(system prompt, older messages, the last `recent` messages, how many old ones are left out).

    Newest first until the page's budget is spent: the oldest of a very long context are left out.

    >>> sys_, older, last, dropped = fold([{"role": "system", "content": "s"}] +
    ...     [{"role": "user", "content": str(i)} for i in range(6)], recent=2)
    >>> sys_.text, [m.text for m in older], [m.text for m in last], dropped
    ('s', ['0', '1', '2', '3'], ['4', '5'], 0)
    """
    system = None
    if messages and messages[0].get("role") == "system":
        system, messages = shown_message(messages[0]), messages[1:]
    kept: list[Shown] = []
    spent = system.size if system else 0
    for message in reversed(messages):
        shown = shown_message(message)
        if kept and spent + shown.size > budget:
            break
        kept.append(shown)
        spent += shown.size
    kept.reverse()
    dropped = len(messages) - len(kept)
    split = max(0, len(kept) - recent)
    return system, kept[:split], kept[split:], dropped


def call_lines(action: Action) -> list[str]:
    """An action's tool calls as JSON lines, the form the diff compares.

    >>> from ingestion.schema import ToolCall
    >>> call_lines(Action(tool_calls=[ToolCall(id="1", name="Read", arguments={"file_path": "a"})]))[:3]
    ['[', '  {', '    "arguments": {']
    """
    calls = [{"name": call.name, "arguments": call.arguments} for call in action.tool_calls]
    if not calls:
        return [f"(no tool call) {' '.join(action.content.split())}"[:MAX_TEXT]]
    try:
        text = orjson.dumps(calls, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    except TypeError:         # what orjson refuses (integers past 64 bits, odd keys)
        text = json.dumps(calls, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return cut(text).splitlines()


def call_diff(chosen: Action, rejected: Action) -> list[tuple[str, str]]:
    """Line diff of the tool calls, chosen (`+`) against rejected (`-`): (kind, line) with kind one of
    same, add, del.

    >>> from ingestion.schema import ToolCall
    >>> bash = lambda c: Action(tool_calls=[ToolCall(id="1", name="Bash", arguments={"command": c})])
    >>> [d for d in call_diff(bash("pytest"), bash("ls")) if d[0] != "same"]
    [('del', '      "command": "ls"'), ('add', '      "command": "pytest"')]
    """
    old, new = call_lines(rejected), call_lines(chosen)
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            out += [("same", line) for line in old[i1:i2]]
        else:
            out += [("del", line) for line in old[i1:i2]] + [("add", line) for line in new[j1:j2]]
    return out
