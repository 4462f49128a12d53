"""The data behind intent keys, and the targets every rule shares: search symbols, new files.

Rules are read once from `configs/intent.toml` (tools) and `configs/intent_shell.toml` (shell
programs). `IntentContext` is what a state knows that a call alone does not say: its cwd and which
files its history has seen, which decides whether a whole-file write creates a scratch file.
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from collections.abc import Sequence
from functools import cached_property, lru_cache
from importlib.resources import files
from typing import Any, Literal

from pydantic import Field

from consensus.canonical import normalize_path
from ingestion.schema import StrictModel

Key = list[Any]  # (family, target...) as a JSON-able list


class ToolIntent(StrictModel):
    kind: Literal["path", "symbol", "write", "shell", "view", "url", "words", "label", "exact"] = "exact"
    family: str = ""
    arg: str = ""
    args: list[str] = Field(default_factory=list)
    default: str | None = None
    on: str | None = None
    cases: dict[str, ToolIntent] = Field(default_factory=dict)


class ToolIntents(StrictModel):
    text_family: str = "reply"
    scratch_dirs: list[str] = Field(default_factory=lambda: [".", "/tmp"])
    tools: dict[str, ToolIntent] = Field(default_factory=dict)


class Program(StrictModel):
    kind: Literal["paths", "symbol", "args", "find", "sed", "git", "create", "say"]
    family: str = ""
    default: str | None = None
    values: list[str] = Field(default_factory=list)
    keep: list[str] = Field(default_factory=list)
    keep_prefixes: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    inspect: list[str] = Field(default_factory=list)
    global_values: list[str] = Field(default_factory=list)


class Interpreters(StrictModel):
    names: list[str] = Field(default_factory=list)
    module_flag: str = "-m"
    code_flags: list[str] = Field(default_factory=list)
    family: str = "run"


class ShellIntents(StrictModel):
    stop_words: list[str] = Field(default_factory=list)
    extensions: list[str] = Field(default_factory=list)
    filters: list[str] = Field(default_factory=list)
    wrappers: dict[str, int] = Field(default_factory=dict)
    interpreters: Interpreters = Field(default_factory=Interpreters)
    programs: dict[str, Program] = Field(default_factory=dict)


def _config(name: str) -> dict[str, Any]:
    return tomllib.loads(files("configs").joinpath(name).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def tool_intents() -> ToolIntents:
    """configs/intent.toml, parsed once per process."""
    return ToolIntents.model_validate(_config("intent.toml"))


@lru_cache(maxsize=1)
def shell_intents() -> ShellIntents:
    """configs/intent_shell.toml, parsed once per process."""
    return ShellIntents.model_validate(_config("intent_shell.toml"))


@lru_cache(maxsize=1)
def _symbol_patterns() -> tuple[re.Pattern[str], frozenset[str]]:
    rules = shell_intents()
    extensions = re.compile(r"\.(?:" + "|".join(map(re.escape, rules.extensions)) + r")(?![A-Za-z0-9_])",
                            re.IGNORECASE)
    return extensions, frozenset(rules.stop_words)


_CLASSES = re.compile(r"\\[AbBdDsSwWZz]")  # regex classes and anchors: not part of any name
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def symbol(pattern: str) -> str:
    """What a search looks for: the identifiers of its pattern, casefolded and sorted, without file
    extensions and stop words; a pattern with none (`*.py`) is its last path part, casefolded.

    >>> [symbol(p) for p in ["TypeParser.java", "class\\\\s+TypeParser", "TypeParser\\\\(", "**/*.py"]]
    ['typeparser', 'typeparser', 'typeparser', '*.py']
    >>> symbol("def parse_args|parse_known")
    'parse_args parse_known'
    """
    extensions, stop = _symbol_patterns()
    text = extensions.sub(" ", _CLASSES.sub(" ", pattern).replace("\\", ""))
    words = sorted({word.casefold() for word in _IDENTIFIER.findall(text)} - stop)
    if words:
        return " ".join(words)
    return posixpath.basename(pattern.rstrip("/")).casefold() or pattern


def _texts(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _texts(item, out)
    elif isinstance(value, list):
        for item in value:
            _texts(item, out)


class IntentContext:
    """A state's cwd and history. Without messages (None) every file counts as seen, so a whole-file
    write keeps its exact form: merging writes needs evidence that the file is new.

    >>> ctx = IntentContext("/repo", [{"role": "tool", "content": "setup.py  src/\\nreproduce.py"}])
    >>> ctx.seen("reproduce.py"), ctx.seen("repro.py"), IntentContext("/repo").seen("repro.py")
    (True, False, True)
    """

    def __init__(self, cwd: str | None = None, messages: Sequence[dict[str, Any]] | None = None) -> None:
        self.cwd = cwd
        self.messages = messages

    @cached_property
    def _history(self) -> str:
        parts: list[str] = []
        for message in self.messages or ():
            if message.get("role") == "tool":
                _texts(message.get("content"), parts)
            for call in message.get("tool_calls") or ():
                _texts((call.get("function") or call).get("arguments"), parts)
        return "\n".join(parts)

    def seen(self, path: str) -> bool:
        """Whether the history has met this file (its name as a whole word in a tool call or result)."""
        if self.messages is None:
            return True
        name = posixpath.basename(path.rstrip("/"))
        if not name:
            return True
        return re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])", self._history) is not None


def write_key(path: str, context: IntentContext | None) -> Key | None:
    """A whole-file write: (create, folder, extension) to a file the state has not seen, where scratch
    folders (cwd, /tmp) are one folder; None (keep the exact form) for a file it has seen.

    >>> ctx = IntentContext("/repo", [])
    >>> write_key("reproduce.java", ctx), write_key("/tmp/Main.java", ctx), write_key("src/x.py", ctx)
    (['create', '.', '.java'], ['create', '.', '.java'], ['create', 'src', '.py'])
    >>> write_key("a.py", IntentContext("/repo", [{"role": "tool", "content": "a.py"}])) is None
    True
    """
    context = context or IntentContext()
    path = normalize_path(path, context.cwd)
    folder, name = posixpath.split(path)
    folder = folder or "."
    scratch = tool_intents().scratch_dirs
    temporary = any(folder == d or folder.startswith(d.rstrip("/") + "/") for d in scratch if d != ".")
    if not temporary and context.seen(path):
        return None
    extension = posixpath.splitext(name)[1].casefold() or name.casefold()
    return ["create", "." if temporary or folder in scratch else folder, extension]
