"""The canonical form of an action: two actions are equivalent when their canonical forms are equal.

A canonical form is a string of canonical JSON (sorted keys, no spaces), so it hashes, sorts and
groups. Per-tool rules (which arguments are paths, shell commands, ignored, or defaults) are data in
`configs/canonical.toml`, read once. No I/O beyond that packaged file.
"""

from __future__ import annotations

import json
import posixpath
import re
import tomllib
from functools import lru_cache
from importlib.resources import files
from typing import Any

from pydantic import Field

from ingestion.schema import Action, StrictModel, ToolCall

Canonical = str  # canonical JSON of an action; see `canonical`


class ToolRule(StrictModel):
    ignore: list[str] = Field(default_factory=list)
    paths: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    defaults: dict[str, Any] = Field(default_factory=dict)
    file_texts: list[str] = Field(default_factory=list)
    patches: list[str] = Field(default_factory=list)   # apply_patch texts: compared as per-file edits
    item_ignore: dict[str, list[str]] = Field(default_factory=dict)


class ShellRule(StrictModel):
    strip_cd_cwd: bool = True
    relative_paths: bool = True
    strip_trailing_semicolon: bool = True


class ActionRule(StrictModel):
    calls_as_multiset: bool = True


class CanonicalRules(StrictModel):
    shell: ShellRule = Field(default_factory=ShellRule)
    action: ActionRule = Field(default_factory=ActionRule)
    default: ToolRule = Field(default_factory=ToolRule)
    tools: dict[str, ToolRule] = Field(default_factory=dict)

    def for_tool(self, name: str) -> ToolRule:
        return self.tools.get(name, self.default)


@lru_cache(maxsize=1)
def load_rules() -> CanonicalRules:
    """The packaged rules, parsed once per process."""
    text = files("configs").joinpath("canonical.toml").read_text(encoding="utf-8")
    return CanonicalRules.model_validate(tomllib.loads(text))


def normalize_text(text: str) -> str:
    """Case and whitespace folded: how text-only answers are compared.

    >>> normalize_text("  Done.\\n The   tests PASS ")
    'done. the tests pass'
    """
    return " ".join(text.casefold().split())


def normalize_path(path: str, cwd: str | None = None) -> str:
    """A path relative to `cwd` when it lies inside it, else absolute; `.` and `..` resolved.

    >>> [normalize_path(p, "/repo") for p in ["/repo/a.py", "./a.py", "src/../a.py", "/repo", "/etc/x"]]
    ['a.py', 'a.py', 'a.py', '.', '/etc/x']
    >>> normalize_path("../lib/b.py", "/repo/src")
    '/repo/lib/b.py'
    """
    path = path.strip()
    if not path:
        return path
    if cwd and _is_plain(path):
        return path   # what the lines below give for a plain relative path, at a tenth of the cost
    if not cwd or path.startswith("~"):
        return posixpath.normpath(path)
    root = _root(cwd)
    prefix = root.rstrip("/") + "/"
    # `./a.py` and `<cwd>/a.py` with a plain rest: what the lines below give, without normpath.
    rest = path[2:] if path.startswith("./") else path[len(prefix):] if path.startswith(prefix) else ""
    if rest and _is_plain(rest):
        return rest
    full = posixpath.normpath(posixpath.join(root, path))
    if full == root:
        return "."
    return full[len(prefix):] if full.startswith(prefix) else full  # relpath, without its cost


@lru_cache(maxsize=64)
def _root(cwd: str) -> str:
    """The cwd normalised (once per cwd: a run has a handful)."""
    return posixpath.normpath(cwd)


def _is_plain(path: str) -> bool:
    """A relative path normpath leaves as it is, and that lies inside any cwd: no `.` or `..` part,
    no doubled, leading or trailing slash, no `~`.

    >>> [_is_plain(p) for p in ["src/a.py", "a.b/c", "./a", "a/../b", "a//b", "a/", "/a", "~/a", ".."]]
    [True, True, False, False, False, False, False, False, False]
    """
    return not path.startswith(("/", "~", ".")) and "/." not in path and "//" not in path \
        and not path.endswith("/")


_SLOW_SHELL = ("'", '"', "\\", "<<")   # what fold_shell must read character by character


def fold_shell(command: str) -> str:
    """Whitespace runs outside quotes folded to one space (or one newline); heredoc bodies kept.

    >>> fold_shell("ls   -la \\\\\\n  src")
    'ls -la src'
    >>> fold_shell("echo 'a   b'  &&  grep -n  \\"x  y\\" f")
    'echo \\'a   b\\' && grep -n "x  y" f'
    """
    if not any(mark in command for mark in _SLOW_SHELL):
        # No quotes, escapes or heredocs: runs of whitespace fold per line, and a run holding a
        # newline is one newline, exactly as the walk gives (tests/test_intent.py checks it).
        return "\n".join(filter(None, (" ".join(line.split()) for line in command.split("\n"))))
    return _fold_walk(command)


def _fold_walk(command: str) -> str:
    """fold_shell character by character, quotes, escapes and heredocs understood."""
    out: list[str] = []
    quote: str | None = None
    space = ""  # the pending separator: "", " " or "\n"
    heredoc = False
    i, n = 0, len(command)
    while i < n:
        ch = command[i]
        if quote:
            out.append(ch)
            if ch == "\\" and quote == '"' and i + 1 < n:
                out.append(command[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch == "\\" and i + 1 < n and command[i + 1] == "\n":
            space = space or " "  # a line continuation is just a space
            i += 1
        elif ch.isspace():
            space = "\n" if ch == "\n" or space == "\n" else " "
        else:
            if space and out:
                out.append(space)
                if space == "\n" and heredoc:
                    # Past a heredoc's first line its body is file content, where spaces matter.
                    out.append(command[i:].rstrip())
                    break
            space = ""
            heredoc = heredoc or (ch == "<" and out[-1:] == ["<"])
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(command[i + 1])
                i += 1
            elif ch in "'\"":
                quote = ch
        i += 1
    return "".join(out)


_CD_PREFIX = re.compile(r"""^cd (?:"([^"]*)"|'([^']*)'|([^\s;&|]+)) ?(?:&&|;) ?""")
_TRAILING_SEMICOLONS = re.compile(r"(?<![\\;]);+\s*$")  # not `\;` (find -exec) nor `;;` (case)


def strip_cd_cwd(command: str, cwd: str | None) -> str:
    """`command` without a leading `cd <cwd> &&` (or `;`): the shell already runs in cwd. Nothing
    else is touched, so it serves to clean a proposal that is shown, not only to compare one.

    >>> strip_cd_cwd("cd /repo && pytest  -q", "/repo"), strip_cd_cwd("cd src && ls", "/repo")
    ('pytest  -q', 'cd src && ls')
    """
    root = _root(cwd) if cwd else ""
    match = _CD_PREFIX.match(command.lstrip())
    if not root or not match:
        return command
    target = next(g for g in match.groups() if g is not None)
    # A relative cwd (some sessions record one) can only be recognised as written.
    same = normalize_path(target, root) == "." if root.startswith("/") else posixpath.normpath(target) == root
    return command.lstrip()[match.end():] if same else command


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def _after_heredocs(command: str) -> bool:
    """Whether the command's last line is shell, not the inside of a heredoc (file content, where a
    `;` is text): true without heredocs, or when the last one is closed before the last line."""
    if "<<" not in command:
        return True
    lines = command.split("\n")
    opened = [m.group(2) for line in lines for m in _HEREDOC.finditer(line)]
    closed = [i for i, line in enumerate(lines) if line.strip() in opened]
    return bool(closed) and closed[-1] < len(lines) - 1


def normalize_command(command: str, cwd: str | None = None, rule: ShellRule | None = None) -> str:
    """A shell command folded, with `cd <cwd> &&` dropped, `<cwd>/` prefixes cut and a trailing `;` gone.

    >>> normalize_command("cd /repo &&  cat  /repo/a.py;", "/repo")
    'cat a.py'
    >>> print(normalize_command(r"find . -name '*.pyc' -exec rm {} \\;"))
    find . -name '*.pyc' -exec rm {} \\;
    """
    rule = rule or load_rules().shell
    command = fold_shell(command)
    if rule.strip_trailing_semicolon and _after_heredocs(command):
        command = _TRAILING_SEMICOLONS.sub("", command)
    if rule.strip_cd_cwd:
        command = strip_cd_cwd(command, cwd)
    root = _root(cwd) if cwd else ""
    if not root.startswith("/"):  # without an absolute cwd there is nothing to make relative
        return command
    if rule.relative_paths and root != "/" and root in command:
        inside, itself = _root_patterns(root)
        command = itself.sub(".", inside.sub("", command))
    return command


@lru_cache(maxsize=64)
def _root_patterns(root: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """`<root>/` and `<root>` itself as whole path tokens: `/repo/a.py` but not `/repository` nor
    `/x/repo/a.py` (compiled once per cwd)."""
    lead = r"(?:^|(?<=[\s'\"=(]))"
    return (re.compile(lead + re.escape(root) + "/"),
            re.compile(lead + re.escape(root) + r"(?=$|[\s'\";&|)])"))


_SHELLS = {"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash"}


def argv_command(value: Any) -> Any:
    """A shell command given as argv (Codex's `shell` tool: `["bash", "-lc", "ls"]`) as the command
    line it runs; any other value as it is.

    >>> argv_command(["bash", "-lc", "ls -la"]), argv_command(["rg", "foo bar"]), argv_command("ls")
    ('ls -la', "rg 'foo bar'", 'ls')
    """
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        return value
    if len(value) == 3 and value[0] in _SHELLS and value[1] in ("-lc", "-c"):
        return value[2]
    import shlex

    return shlex.join(value)


_PATCH_FILE = re.compile(r"^\*\*\* (Add|Delete|Update) File: (.+)$")


def patch_edits(patch: str, cwd: str | None = None) -> list[list[str]] | str:
    """An `apply_patch` text (Codex's patch language) as its per-file edits, sorted by path:
    `[operation, path, body]`, paths normalised like every path, trailing blanks of each body line
    dropped; so two patches making the same edits to the same files in another order are one action.
    Text that is no such patch is returned as it is.

    >>> a = "*** Begin Patch\\n*** Update File: /r/b.py\\n-x\\n+y\\n*** Add File: a.py\\n+new\\n*** End Patch"
    >>> b = ("*** Begin Patch\\n*** Add File: ./a.py\\n+new  \\n*** Update File: b.py\\n-x\\n+y\\n"
    ...      "*** End Patch\\n")
    >>> patch_edits(a, "/r") == patch_edits(b, "/r")
    True
    >>> patch_edits(a, "/r")[0]
    ['Add', 'a.py', '+new']
    """
    edits: list[list[str]] = []
    for line in patch.split("\n"):   # on \n alone: a U+0085 in a patched line is that line's
        found = _PATCH_FILE.match(line)
        if found:
            edits.append([found.group(1), normalize_path(found.group(2).strip(), cwd), ""])
        elif edits and line.strip() not in ("*** End Patch", "*** End of File"):
            edits[-1][2] += line.rstrip() + "\n"
    if not edits:
        return patch
    return sorted([op, path, body.rstrip("\n")] for op, path, body in edits)


def _canonical_value(key: str, value: Any, rule: ToolRule, cwd: str | None) -> Any:
    if key in rule.paths:
        if isinstance(value, str):
            return normalize_path(value, cwd)
        if isinstance(value, list):
            return [normalize_path(v, cwd) if isinstance(v, str) else v for v in value]
    if key in rule.commands:
        value = argv_command(value)
        if isinstance(value, str):
            return normalize_command(value, cwd)
    if key in rule.patches and isinstance(value, str):
        return patch_edits(value, cwd)
    if key in rule.file_texts and isinstance(value, str):
        return value.rstrip("\r\n")
    if key in rule.item_ignore and isinstance(value, list):
        drop = rule.item_ignore[key]
        return [{k: v for k, v in item.items() if k not in drop} if isinstance(item, dict) else item
                for item in value]
    return value


def canonical_call(call: ToolCall, cwd: str | None = None) -> dict[str, Any]:
    """One call as `{"name", "arguments"}`: ignored keys and defaults dropped, paths and commands normalised.

    >>> canonical_call(ToolCall(id="x", name="Bash", arguments={"command": "ls  -la", "description": "list"}))
    {'name': 'Bash', 'arguments': {'command': 'ls -la'}}
    """
    rule = load_rules().for_tool(call.name)
    arguments = {}
    for key, value in call.arguments.items():
        if key in rule.ignore:
            continue
        value = _canonical_value(key, value, rule, cwd)
        if key in rule.defaults and value == rule.defaults[key]:
            continue
        arguments[key] = value
    return {"name": call.name, "arguments": arguments}


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)  # one encoder: json.dumps with options builds one per call


def canonical(action: Action, cwd: str | None = None) -> Canonical:
    """Canonical JSON of an action: its calls when it has any (a multiset: sorted), else its folded text.

    Text beside tool calls is narration ("Let me look at the tests") that teachers word
    differently; the calls are what the action does, so only they count.

    >>> canonical(Action(content="Let me see.", tool_calls=[ToolCall(id="1", name="Read",
    ...     arguments={"file_path": "/repo/./a.py"})]), cwd="/repo")
    '{"calls":[{"arguments":{"file_path":"a.py"},"name":"Read"}]}'
    >>> canonical(Action(content="All  tests pass."))
    '{"text":"all tests pass."}'
    """
    return canonical_parts(action, cwd)[0]


def canonical_parts(action: Action, cwd: str | None = None) -> tuple[Canonical, dict[str, Any]]:
    """The canonical form and the object it encodes (`{"calls": [...]}` or `{"text": ...}`), for
    callers that read the form again (intent keys) without parsing it back.

    >>> canonical_parts(Action(content="Done."))
    ('{"text":"done."}', {'text': 'done.'})
    """
    calls = action.tool_calls
    if not calls:
        return _text_parts(action.content)
    if len(calls) == 1:   # most actions: the whole form is kept with the call
        _, form, value = _call_parts(calls[0], cwd)
        return form, value
    parts = [_call_parts(call, cwd) for call in calls]
    texts = [form[len(_ONE_CALL):-2] for _, form, _ in parts]   # each call's own encoding
    order = range(len(parts))
    if load_rules().action.calls_as_multiset:
        order = sorted(order, key=texts.__getitem__)
    # The encoding of {"calls": [...]} is its calls' encodings joined: each is made once, and kept.
    return _ONE_CALL + ",".join(texts[k] for k in order) + "]}", {"calls": [parts[k][0] for k in order]}


_ONE_CALL = '{"calls":['   # how every form of calls begins


CACHE_SIZE = 65_536      # canonical calls (and texts) kept, by what they are made from; cleared when full
CACHED_CHARS = 4_096     # calls with more argument text (a file's content) are not kept
CACHED_TEXT_CHARS = 256  # nor longer texts: those that recur across states are short ("Done.")
_CALLS: dict[tuple[Any, ...], tuple[Any, ...]] = {}   # the parts, and the types when not all str
_TEXTS: dict[str, tuple[Canonical, dict[str, Any]]] = {}


def _text_parts(content: str) -> tuple[Canonical, dict[str, Any]]:
    """A text answer's form and object; short texts (`Done.`, the same reply to many states) kept."""
    found = _TEXTS.get(content)
    if found is not None:
        return found
    value: dict[str, Any] = {"text": normalize_text(content)}
    parts = _dumps(value), value
    if len(content) <= CACHED_TEXT_CHARS:
        if len(_TEXTS) >= CACHE_SIZE:
            _TEXTS.clear()
        _TEXTS[content] = parts
    return parts


def _call_parts(call: ToolCall, cwd: str | None) -> tuple[dict[str, Any], Canonical, dict[str, Any]]:
    """A call's canonical dict, and the form and object of an action of this call alone (the call's
    own encoding is the form without its first 10 and last 2 characters). Teachers write the same
    calls again and again (`git status`, `ls`, a test command) across states: each is canonicalised
    once. The dicts are shared: callers read them, never change them."""
    arguments = call.arguments
    try:
        key = (call.name, cwd, *arguments.items())
        found = _CALLS.get(key)
    except TypeError:    # a list or object argument: not hashable, computed each time
        key = found = None
    # Types count too: 1, 1.0 and True are equal as keys but not as JSON (nor -0.0 and 0.0, so floats
    # are never kept). A kept call of strings alone matches only strings: its types need no check.
    if found is not None and (found[3] is None or found[3] == tuple(map(type, arguments.values()))):
        return found[:3]
    value = canonical_call(call, cwd)
    parts = value, _ONE_CALL + _dumps(value) + "]}", {"calls": [value]}
    if key is not None:
        types = tuple(map(type, arguments.values()))
        strings = [v for v in arguments.values() if isinstance(v, str)]
        if float not in types and sum(map(len, strings)) <= CACHED_CHARS:
            if len(_CALLS) >= CACHE_SIZE:
                _CALLS.clear()
            _CALLS[key] = (*parts, None if len(strings) == len(types) else types)
    return parts


def clean_action(action: Action, cwd: str | None = None) -> Action:
    """The action as it will be shown (`chosen`): a `cd <cwd> &&` prefix, which the canonical form
    ignores, cut from its shell commands; everything else exactly as the teacher wrote it.

    >>> a = Action(tool_calls=[ToolCall(id="1", name="Bash", arguments={"command": "cd /repo && ls"})])
    >>> clean_action(a, "/repo").tool_calls[0].arguments
    {'command': 'ls'}
    """
    calls = []
    for call in action.tool_calls:
        args = call.arguments
        keys = [k for k in load_rules().for_tool(call.name).commands if isinstance(args.get(k), str)]
        changed = {k: v for k in keys if (v := strip_cd_cwd(args[k], cwd)) != args[k]}
        calls.append(call.model_copy(update={"arguments": {**args, **changed}}) if changed else call)
    if all(new is old for new, old in zip(calls, action.tool_calls, strict=True)):
        return action
    return action.model_copy(update={"tool_calls": calls})


def equivalent(a: Action, b: Action, cwd: str | None = None) -> bool:
    """Same canonical form.

    >>> bash = lambda **kw: Action(tool_calls=[ToolCall(id="1", name="Bash", arguments=kw)])
    >>> equivalent(bash(command="ls   -la"), bash(command="ls -la", description="List files"))
    True
    >>> equivalent(bash(command="ls -la"), bash(command="ls -l"))
    False
    """
    return canonical(a, cwd) == canonical(b, cwd)
