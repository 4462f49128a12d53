"""The intent key of a shell command: list / read / locate / run tests / run a program / git
inspection / create a scratch file, by the rules of `configs/intent_shell.toml`.

A compound command maps only when every part does; otherwise `shell_key` returns None and the call
keeps its exact canonical form. Wrappers (`timeout 60`, `uv run`, `env X=1`) and interpreters
(`python -m pytest` is `pytest`) are looked through first.
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache

from consensus.canonical import normalize_path
from consensus.intent_rules import IntentContext, Key, Program, shell_intents, symbol, write_key
from consensus.shell import Pipeline, Simple, split_command

_INTERPRETER_VERSION = re.compile(r"^(python|pypy|ruby|perl|php|node)[0-9.]*$")
_SED_PRINT = re.compile(r"^\s*\d+\s*(,\s*(\d+|\$)\s*)?p\s*$")
_FIND_PATTERNS = frozenset({"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex",
                            "-iregex"})
_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
                           "-fprintf", "-fls"})
_SAY = "say"


def _positionals(args: tuple[str, ...] | list[str], rule: Program) -> tuple[list[str], list[str]]:
    """(positional words, kept options as `opt=value` or the flag) of a program's arguments."""
    positional: list[str] = []
    kept: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":  # ends the options, but what follows (`cargo test x -- --nocapture`) is
            pass          # still flags and targets, read the same way
        elif word.startswith("-") and word != "-":
            name, _, value = word.partition("=")
            if name in rule.keep:
                if not value and i + 1 < len(args):
                    value = args[i + 1]
                    i += 1
                kept.append(f"{name}={value}")
            elif any(word.startswith(prefix) for prefix in rule.keep_prefixes):
                kept.append(word)
            elif name in rule.values or name in rule.patterns:
                i += 0 if value else 1
        else:
            positional.append(word)
        i += 1
    return positional, kept


def _paths(words: list[str], context: IntentContext) -> list[str]:
    return sorted(normalize_path(word, context.cwd) for word in words)


@lru_cache(maxsize=1)
def _wrappers() -> tuple[tuple[tuple[str, ...], int], ...]:
    return tuple((tuple(prefix.split()), own) for prefix, own in shell_intents().wrappers.items())


@lru_cache(maxsize=1)
def _first_words() -> tuple[frozenset[str], frozenset[str]]:
    """(first words of wrappers, interpreter names): most commands are neither, and say so in one look-up."""
    rules = shell_intents()
    return frozenset(words[0] for words, _ in _wrappers()), frozenset(rules.interpreters.names)


def _unwrap(argv: tuple[str, ...]) -> tuple[str, ...] | Key | None:
    """argv with wrappers and interpreters looked through; a script run is returned as its key."""
    rules = shell_intents()
    wrappers, interpreters_names = _first_words()
    changed = argv[0] in wrappers
    while argv and changed:
        changed = False
        for words, own in _wrappers():
            if argv[:len(words)] != words:
                continue
            rest = list(argv[len(words):])
            while rest and (rest[0].startswith("-") or "=" in rest[0] or own > 0):
                if not rest[0].startswith("-") and "=" not in rest[0]:
                    own -= 1
                rest.pop(0)
            argv, changed = tuple(rest), True
            break
    if not argv:
        return None
    name = posixpath.basename(argv[0])
    interpreters = rules.interpreters
    if name in interpreters_names or _INTERPRETER_VERSION.match(name):
        for i, word in enumerate(argv[1:], 1):
            if word == interpreters.module_flag and i + 1 < len(argv):
                return argv[i + 1:]
            if word in interpreters.code_flags or word.startswith(interpreters.module_flag):
                return None  # inline code (`-c`), or `-mpytest`: keep the exact form
            if not word.startswith("-"):
                return [interpreters.family, *argv[i:]]
        return None
    return argv


@lru_cache(maxsize=1)
def _multi_word_heads() -> frozenset[str]:
    """What comes before the first space of each program of several words (`npm` of `npm test`)."""
    return frozenset(name.split(" ", 1)[0] for name in shell_intents().programs if " " in name)


def _lookup(argv: tuple[str, ...]) -> tuple[Program | None, tuple[str, ...]]:
    """The program's rule and its arguments; `mvn -q test X` is `mvn test` with `-q X` (flags between
    the words of a several-word program are its arguments)."""
    programs = shell_intents().programs
    name = posixpath.basename(argv[0])
    if name not in _multi_word_heads() and " " not in name:
        # Every longer look-up below is `name` + " " + ...: no program starts so (most don't).
        return programs.get(name), argv[1:]
    words = [(0, name)] + [(i, w) for i, w in enumerate(argv[1:4], 1) if not w.startswith("-")]
    for size in (3, 2, 1):
        if len(words) >= size and (rule := programs.get(" ".join(w for _, w in words[:size]))) is not None:
            end = words[size - 1][0]
            flags = tuple(w for w in argv[1:end] if w.startswith("-"))
            return rule, flags + argv[end + 1:]
    return None, argv[1:]


def _create(simple: Simple, rule: Program | None, args: tuple[str, ...],
            context: IntentContext) -> Key | None:
    """`cat > f << EOF`, `echo x > f`, `tee f`, `touch f`: a whole-file write (`cat` only with no file
    of its own, else it copies); any other redirection keeps the exact form."""
    writer = rule is not None and (rule.kind in ("create", _SAY) or (rule.family == "read" and not args))
    if not writer:
        return None
    assert rule is not None
    targets = list(simple.writes)
    if rule.kind == "create":
        targets += _positionals(args, rule)[0]
    return write_key(targets[0], context) if len(targets) == 1 else None


def _find(args: tuple[str, ...], context: IntentContext) -> Key | None:
    roots: list[str] = []
    patterns: list[str] = []
    i = 0
    while i < len(args) and not args[i].startswith(("-", "(", "!")):
        roots.append(args[i])
        i += 1
    while i < len(args):
        word = args[i]
        if word in _FIND_ACTIONS:
            return None
        if word in _FIND_PATTERNS and i + 1 < len(args):
            patterns.append(args[i + 1])
        i += 1
    if patterns:
        return ["locate", symbol(" ".join(patterns))]
    return ["list", *_paths(roots or ["."], context)]


def _sed(args: tuple[str, ...], context: IntentContext) -> tuple[Key | None, bool]:
    """(key, is a stdin filter): `sed -n 'A,Bp' FILE` reads FILE; `-i` edits in place (no key)."""
    flags = [a for a in args if a.startswith("-")]
    if any(f.startswith(("-i", "--in-place")) for f in flags):
        return None, False
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return None, False
    script, files = words[0], words[1:]
    if not files:
        return None, True
    if any(f in ("-n", "--quiet", "--silent") for f in flags) and _SED_PRINT.match(script):
        return ["read", *_paths(files, context)], False
    return None, False


def _git(rule: Program, args: tuple[str, ...], context: IntentContext) -> Key | None:
    rest = list(args)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option in rule.global_values and rest:
            rest.pop(0)
    if not rest:
        return None
    sub, rest = rest[0], rest[1:]
    if sub == "grep":
        return _symbol(Program(kind="symbol", family="locate", patterns=["-e"]), tuple(rest))
    if sub not in rule.inspect:
        return None
    positional, _ = _positionals(rest, rule)
    return ["git", sub, *positional]


def _symbol(rule: Program, args: tuple[str, ...]) -> Key | None:
    positional, _ = _positionals(args, rule)
    patterns = [args[i + 1] for i, a in enumerate(args[:-1]) if a in rule.patterns]
    patterns += [a.partition("=")[2] for a in args if a.partition("=")[0] in rule.patterns and "=" in a]
    if not patterns and positional:
        patterns = [positional.pop(0)]
    if not patterns:
        return None
    return [rule.family, symbol(" ".join(patterns))]


def _simple_key(simple: Simple, context: IntentContext) -> Key | None:
    if simple.reads:
        return None
    argv = _unwrap(simple.argv)
    if argv is None or isinstance(argv, list):
        if isinstance(argv, list) and not simple.writes:
            return [argv[0], normalize_path(argv[1], context.cwd), *argv[2:]]
        return None
    rule, args = _lookup(argv)
    if rule is None and "/" in argv[0] and not simple.writes:
        return [shell_intents().interpreters.family, normalize_path(argv[0], context.cwd), *argv[1:]]
    if simple.writes or (rule is not None and rule.kind == "create"):
        return _create(simple, rule, args, context)
    if rule is None:
        return None
    if rule.kind == "paths":
        positional, _ = _positionals(args, rule)
        if not positional and rule.default is None:
            return None  # it reads its input: only a filter, after a pipe
        return [rule.family, *_paths(positional or [rule.default], context)]  # type: ignore[list-item]
    if rule.kind == "symbol":
        return _symbol(rule, args)
    if rule.kind == "args":
        positional, kept = _positionals(args, rule)
        return [rule.family, *sorted(_paths(positional, context) + kept)]
    if rule.kind == "find":
        return _find(args, context)
    if rule.kind == "sed":
        return _sed(args, context)[0]
    if rule.kind == "git":
        return _git(rule, args, context)
    return [_SAY] if rule.kind == _SAY else None


def _stage_key(simple: Simple) -> Key | None | bool:
    """A later pipeline stage: True when it only shapes output (dropped), (match, symbol) for a
    `grep X` over the output, None when it does more (the command keeps its exact form)."""
    argv = _unwrap(simple.argv)
    if simple.writes or simple.reads or not isinstance(argv, tuple):
        return None
    rule, args = _lookup(argv)
    name = posixpath.basename(argv[0])
    if rule is not None and rule.kind == "symbol":
        positional, _ = _positionals(args, rule)
        key = _symbol(rule, args)
        has_files = len(positional) > (0 if any(a in rule.patterns for a in args) else 1)
        return None if key is None or has_files else ["match", key[1]]
    if rule is not None and rule.kind == "sed":
        key, is_filter = _sed(args, IntentContext())
        return True if is_filter else None
    if name in shell_intents().filters:
        positional, _ = _positionals(args, rule or Program(kind="paths"))
        return True if not positional or name in ("awk", "jq") and len(positional) == 1 else None
    return None


def _pipeline_key(pipeline: Pipeline, context: IntentContext) -> Key | None:
    first = _simple_key(pipeline[0], context)
    if first is None:
        return None
    stages: list[Key] = []
    for simple in pipeline[1:]:
        stage = _stage_key(simple)
        if stage is None or stage is False:
            return None
        if isinstance(stage, list):
            stages.append(stage)
    return ["pipe", first, *stages] if stages else first


def shell_key(command: str, context: IntentContext | None = None) -> Key | None:
    """The intent key of a (canonical) shell command, or None to keep its exact form.

    >>> ctx = IntentContext("/repo", [])
    >>> shell_key("ls -F", ctx) == shell_key("ls -a", ctx) == ["list", "."]
    True
    >>> shell_key("cat a.py", ctx) == shell_key("sed -n 1,200p a.py", ctx) == ["read", "a.py"]
    True
    >>> shell_key("python -m pytest -q tests/a.py 2>&1 | tail -5", ctx)
    ['test', 'tests/a.py']
    >>> shell_key("rm -rf build", ctx) is None, shell_key("ls build && rm -rf build", ctx) is None
    (True, True)
    """
    context = context or IntentContext()
    pipelines = split_command(command)
    if pipelines is None:
        return None
    parts: list[Key] = []
    for pipeline in pipelines:
        key = _pipeline_key(pipeline, context)
        if key is None:
            return None
        if key != [_SAY]:
            parts.append(key)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else ["seq", *parts]
