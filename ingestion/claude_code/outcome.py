"""What each Claude Code turn led to (`metadata.outcome`, ingestion/outcome.py's shape).

A call's outcome is read from the `tool_result` that answers it, wherever in the file it lies
(parallel calls log results on side branches): a rejection or interrupt text (configs/outcomes.toml)
says so whatever `is_error` says; else `is_error: true` is an error, with the head of its text and,
for Bash, the exit code; a result that failed only because a parallel sibling did is no result of
its own; no result anywhere is `no_result`. A turn without calls is `interrupted` / `rejected` when
the next user message (a child of the turn in the uuid DAG) says so.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from configs import config_path
from ingestion.claude_code.convert import tool_result_text
from ingestion.claude_code.session import Group, Session
from ingestion.outcome import call_outcome, turn_outcome

PASS_THROUGH = ("system", "attachment", "progress")   # records between a turn and the user's reply


@dataclass(frozen=True)
class Rules:
    rejected: tuple[str, ...]
    interrupted: tuple[str, ...]
    not_own: tuple[str, ...]
    exit_code: re.Pattern[str]


@lru_cache(maxsize=1)
def load_rules() -> Rules:
    """The texts of configs/outcomes.toml.

    >>> load_rules().interrupted[0]
    '[Request interrupted by user for tool use]'
    """
    with open(config_path("outcomes.toml"), "rb") as handle:
        data = tomllib.load(handle)["claude_code"]
    return Rules(tuple(data["rejected"]), tuple(data["interrupted"]), tuple(data["not_own"]),
                 re.compile(data["exit_code"]))


def text_kind(text: str, rules: Rules) -> str | None:
    """`rejected` / `interrupted` when a text starts with one of the rules' wordings, else None.

    >>> r = load_rules()
    >>> text_kind("[Request interrupted by user]", r), text_kind("The user doesn't want to proceed with "
    ...     "this tool use. The tool use was rejected", r), text_kind("ok", r)
    ('interrupted', 'rejected', None)
    """
    head = text.lstrip()
    if head.startswith(rules.rejected):
        return "rejected"
    if head.startswith(rules.interrupted):
        return "interrupted"
    return None


def result_outcome(call_id: str, name: str, block: dict[str, Any] | None, rules: Rules) -> dict[str, Any]:
    """One call's outcome from the tool_result block answering it (None: no result was recorded).

    >>> r = load_rules()
    >>> result_outcome("t", "Bash", {"content": "Exit code 2\\nboom", "is_error": True}, r)["exit_code"]
    2
    >>> stopped = {"content": "Exit code 137\\n[Request interrupted by user for tool use]", "is_error": True}
    >>> result_outcome("t", "Bash", stopped, r)["kind"]
    'interrupted'
    >>> sibling = {"content": "<tool_use_error>Sibling tool call errored</tool_use_error>", "is_error": True}
    >>> result_outcome("t", "Read", sibling, r)["kind"], result_outcome("t", "Read", None, r)["kind"]
    ('no_result', 'no_result')
    """
    if block is None:
        return call_outcome(call_id, name, "no_result")
    text = tool_result_text(block.get("content"))
    code = rules.exit_code.match(text)
    # A shell stopped by the user: `Exit code 137\n[Request interrupted by user for tool use]\n…` (2.1.x)
    kind = text_kind(text[code.end():].lstrip("\n") if code else text, rules)
    if kind is not None:
        return call_outcome(call_id, name, kind, text, int(code.group(1)) if code else None)
    if block.get("is_error") is not True:
        return call_outcome(call_id, name, "ok")
    if text.strip().startswith(rules.not_own):
        return call_outcome(call_id, name, "no_result", text)
    return call_outcome(call_id, name, "error", text, int(code.group(1)) if code else None)


def user_text(content: Any) -> str:
    """The text a user record says, tool results aside.

    >>> user_text([{"type": "tool_result", "content": "x"}, {"type": "text", "text": "[Request interrupted"}])
    '[Request interrupted'
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(b.get("text") or "" for b in content if isinstance(b, dict) and b.get("type") == "text")


class SessionOutcomes:
    """Outcomes of a session's turns; the children index is built once, on the first text turn."""

    def __init__(self, session: Session, rules: Rules | None = None) -> None:
        self.session = session
        self.rules = rules or load_rules()
        self._children: dict[str, list[str]] | None = None

    def of(self, group: Group) -> dict[str, Any]:
        calls = group.action.tool_calls
        if not calls:
            return turn_outcome([], text_kind=self._reply_kind(group))
        return turn_outcome([result_outcome(c.id, c.name, self._result(c.id), self.rules) for c in calls])

    def _result(self, call_id: str) -> dict[str, Any] | None:
        found = self.session.results.get(call_id)
        if found is None:
            return None
        content = self.session.nodes[found[1]].content
        return next((b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
                     and str(b.get("tool_use_id")) == call_id), None)

    def _reply_kind(self, group: Group) -> str | None:
        """What the next user message says of a text turn: the user records that follow the turn's
        nodes in the DAG, through system / attachment / progress records."""
        if self._children is None:
            self._children = {}
            for node in self.session.nodes.values():
                if node.parent is not None:
                    self._children.setdefault(node.parent, []).append(node.uuid)
        own = {n.uuid for n in group.nodes}
        stack = [c for n in group.nodes for c in self._children.get(n.uuid, ()) if c not in own]
        seen: set[str] = set()
        while stack:
            uuid = stack.pop()
            if uuid in seen:
                continue
            seen.add(uuid)
            node = self.session.nodes[uuid]
            if node.type == "user":
                kind = text_kind(user_text(node.content), self.rules)
                if kind is not None:
                    return kind
            elif node.type in PASS_THROUGH:
                stack.extend(self._children.get(uuid, ()))
        return None
