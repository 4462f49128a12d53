"""Intent keys: what an action is for, so that differently written actions with one purpose are one vote.

Each tool call maps to (family, target) by `configs/intent.toml` (and `configs/intent_shell.toml` for
shell commands): `Read a.py`, `cat a.py` and `sed -n 1,200p a.py` are all `read a.py`; `Glob
**/TypeParser.java`, `Grep TypeParser` and `grep -rn TypeParser .` are all `locate typeparser`. A call
without a rule, an edit, a write to a file the state has seen, or a command that does not map keeps
its exact canonical form inside the key, so the intent tier never merges what it cannot read.

The key is computed from the canonical form (`consensus.canonical`), so canonically equal actions
always have equal keys: every exact group lies inside one intent group. Parallel calls are a
multiset (sorted keys). A text-only answer is `reply`: the turn ends and the user gets the word back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from consensus.canonical import Canonical, argv_command, canonical, normalize_path
from consensus.intent_rules import IntentContext, Key, ToolIntent, symbol, tool_intents, write_key
from consensus.shell_intent import shell_key
from ingestion.schema import Action

IntentKey = str  # canonical JSON of the sorted per-call keys

_URL = re.compile(r"^[a-z][a-z0-9+.-]*://(www\.)?", re.IGNORECASE)
_WORD = re.compile(r"\w+")


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)  # one encoder: json.dumps with options builds one per call


def _string(arguments: dict[str, Any], name: str) -> str | None:
    value = argv_command(arguments.get(name))   # Codex's `shell` takes its command as argv
    return value if isinstance(value, str) else None


def _apply(rule: ToolIntent, arguments: dict[str, Any], context: IntentContext) -> Key | None:
    if rule.on is not None:
        case = rule.cases.get(str(arguments.get(rule.on)))
        return _apply(case, arguments, context) if case is not None else None
    value = _string(arguments, rule.arg) if rule.arg else None
    if rule.kind == "label":
        return [rule.family, *(arguments.get(name) for name in rule.args)]
    if rule.kind == "path":
        value = value if value is not None else rule.default
        return None if value is None else [rule.family, normalize_path(value, context.cwd)]
    if value is None:
        return None
    if rule.kind == "symbol":
        return [rule.family, symbol(value)]
    if rule.kind == "write":
        return write_key(value, context)
    if rule.kind == "shell":
        return shell_key(value, context)
    if rule.kind == "view":
        path = normalize_path(value, context.cwd)
        has_extension = "." in path.rsplit("/", 1)[-1].lstrip(".")
        return ["read" if has_extension or "view_range" in arguments else "list", path]
    if rule.kind == "url":
        return [rule.family, _URL.sub("", value.strip()).split("#")[0].rstrip("/").casefold()]
    if rule.kind == "words":
        return [rule.family, " ".join(sorted({w.casefold() for w in _WORD.findall(value)}))]
    return None


def call_key(name: str, arguments: dict[str, Any], context: IntentContext | None = None) -> Key | None:
    """(family, target) of one canonical call, or None when it keeps its exact form.

    >>> ctx = IntentContext("/repo", [])
    >>> call_key("Read", {"file_path": "a.py"}, ctx), call_key("Bash", {"command": "cat a.py"}, ctx)
    (['read', 'a.py'], ['read', 'a.py'])
    >>> call_key("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"}, ctx) is None
    True
    """
    rule = tool_intents().tools.get(name)
    if rule is None:
        return None
    return _apply(rule, arguments, context or IntentContext())


def intent_of(form: Canonical, context: IntentContext | None = None,
              parsed: dict[str, Any] | None = None) -> IntentKey:
    """The intent key of a canonical form (computed once per proposal, from the form the exact tier
    already made).

    >>> ctx = IntentContext("/repo", [])
    >>> read = intent_of('{"calls":[{"arguments":{"file_path":"a.py"},"name":"Read"}]}', ctx)
    >>> read == intent_of('{"calls":[{"arguments":{"command":"head -50 a.py"},"name":"Bash"}]}', ctx)
    True
    >>> intent_of('{"text":"done."}')
    '[["reply"]]'
    """
    parsed = parsed if parsed is not None else json.loads(form)  # the object `form` encodes, if at hand
    if "calls" not in parsed:
        family = tool_intents().text_family  # "" compares text answers by their exact form
        return _dumps([[family]] if family else [["=", parsed]])
    keys = []
    for call in parsed["calls"]:
        key = call_key(call["name"], call["arguments"], context)
        keys.append(key if key is not None else ["=", call])
    return _dumps(sorted(keys, key=_dumps) if len(keys) > 1 else keys)


def intent(action: Action, context: IntentContext | None = None) -> IntentKey:
    """The intent key of an action in a state (`context`: its cwd and history).

    >>> from ingestion.schema import ToolCall
    >>> bash = lambda cmd: Action(tool_calls=[ToolCall(id="1", name="Bash", arguments={"command": cmd})])
    >>> ctx = IntentContext("/repo", [])
    >>> intent(bash("pytest tests/a.py"), ctx) == intent(bash("python -m pytest -x tests/a.py"), ctx)
    True
    >>> intent(bash("pytest tests/a.py"), ctx) == intent(bash("pytest tests/b.py"), ctx)
    False
    """
    context = context or IntentContext()
    return intent_of(canonical(action, context.cwd), context)
