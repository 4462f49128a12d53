"""A shell command split into simple commands, with the stdlib's `shlex` (no I/O, no execution).

`split_command` gives the command's lists and pipelines: `a && b | c; d` is
`[[a], [b, c], [d]]`, each simple command its argv, the files its output is redirected to, and
whether it reads a heredoc. It covers what agents type (`&&`, `||`, `;`, newlines, pipes,
`2>&1`, `> /dev/null`, `VAR=x cmd`, heredocs); anything it does not model (`$(...)`, backticks,
subshells, `&` background jobs, `if`/`for`/functions, `<<<`) gives None, and the caller keeps the
command's exact form. Why shlex and not a full parser such as bashlex: the intent tier parses
every Bash proposal a vote sees, bashlex took 75–300 µs a command here against 10–45 µs for
shlex, and whatever shlex cannot split is already refused above.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from itertools import chain

_GROUPING = frozenset("()&")
_UNSUPPORTED = re.compile(r"\$\(|`|<\(|>\(")
_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
                       "esac", "function", "select", "{", "}", "[[", "]]", "!"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PUNCTUATION = "();<>|&\n"
_OPERATOR = frozenset(_PUNCTUATION)
_REDIRECTS = frozenset({">", ">>", "<", ">&", "&>", "&>>", ">|", "<<", "<<-", "<>"})
_NULL_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})


@dataclass(frozen=True)
class Simple:
    """One simple command: its words (env assignments dropped) and what it redirects."""

    argv: tuple[str, ...]
    writes: tuple[str, ...] = ()      # files the output goes to (not /dev/null, not another fd)
    reads: tuple[str, ...] = ()       # files read with `<`
    heredoc: bool = False             # reads a `<<` document (its text is not in `argv`)


Pipeline = list[Simple]


def _heredoc_parts(command: str) -> list[tuple[str, bool]] | None:
    """(line, has_heredoc) pieces: every heredoc body cut out, so only command lines remain."""
    if "<<" not in command:
        return [(line, False) for line in command.split("\n")]
    lines = command.split("\n")
    out: list[tuple[str, bool]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        match = re.search(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1", line)
        if not match or "<<<" in line:
            out.append((line, False))
            continue
        end = next((j for j in range(i, len(lines)) if lines[j].strip() == match.group(2)), None)
        if end is None:
            return None  # an unterminated document: nothing reliable to say
        out.append((line[:match.start()] + "<< HEREDOC" + line[match.end():], True))
        i = end + 1
    return out


# Lines without backslashes are split by two regular expressions into the very tokens shlex gives
# (tests/test_shell.py checks them against it); 5 to 15 times faster, and the intent tier splits
# every shell command it votes on. Anything else goes to shlex itself.
_SCAN = re.compile(r"""(\s+)|([();<>|&]+)|((?:[^\s'"();<>|&]+|'[^']*'|"[^"]*")+)""")
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


def _unquote(match: re.Match[str]) -> str:
    return match.group(1) if match.group(1) is not None else match.group(2)


def _fast_tokens(line: str) -> list[str] | None:
    found = _SCAN.findall(line)
    # Matches never overlap, so they cover the line exactly when their lengths add up to it; a gap
    # is an unbalanced quote: let shlex say so.
    if sum(map(len, chain.from_iterable(found))) != len(line):
        return None
    return [operator or (_QUOTED.sub(_unquote, word) if "'" in word or '"' in word else word)
            for space, operator, word in found if not space]


def _tokens(line: str) -> list[str] | None:
    if "\\" not in line and (tokens := _fast_tokens(line)) is not None:
        return tokens
    lexer = shlex.shlex(line, posix=True, punctuation_chars=_PUNCTUATION)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote
        return None


def _simple(words: list[str], heredoc: bool) -> Simple | None:
    argv: list[str] = []
    writes: list[str] = []
    reads: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in _REDIRECTS:
            if i + 1 >= len(words):
                return None
            target = words[i + 1]
            if word in ("<<", "<<-"):
                pass  # the document itself was cut out by _heredoc_parts
            elif word == "<":
                reads.append(target)
            elif not (word == ">&" and target.isdigit()) and target not in _NULL_TARGETS:
                writes.append(target)
            i += 2
            continue
        if word and word[0] in _OPERATOR and set(word) <= _OPERATOR:
            return None  # an operator shlex glued to another (`;;`, `|>`): not ours to guess
        # `2>&1`: a lone fd number right before a redirection belongs to it.
        if word.isdigit() and len(word) == 1 and i + 1 < len(words) and words[i + 1] in _REDIRECTS:
            i += 1
            continue
        if not argv and _ASSIGNMENT.match(word):
            i += 1  # `PYTHONPATH=src pytest`: the environment, not the command
            continue
        argv.append(word)
        i += 1
    if not argv or argv[0] in _KEYWORDS:
        return None
    return Simple(tuple(argv), tuple(writes), tuple(reads), heredoc)


def _separator(token: str) -> str | None:
    """`list` for `&&`, `||`, `;`, newline (and runs of them), `pipe` for `|`, else None."""
    if token in ("|", "|&"):
        return "pipe"
    rest = token.replace("\n", "")
    if rest in ("", ";", "&&", "||") or (set(token) <= {";", "\n"}):
        return "list"
    return None


def split_command(command: str) -> list[Pipeline] | None:
    """The command's pipelines in order, or None when it uses shell syntax this module does not model.

    >>> [[s.argv for s in p] for p in split_command("cd src && grep -rn 'a|b' . 2>&1 | head -5; ls")]
    [[('cd', 'src')], [('grep', '-rn', 'a|b', '.'), ('head', '-5')], [('ls',)]]
    >>> split_command("cat > t.py << 'EOF'\\nprint(1)\\nEOF\\npython t.py")[0][0]
    Simple(argv=('cat',), writes=('t.py',), reads=(), heredoc=True)
    >>> split_command("echo $(date)"), split_command("sleep 5 &")
    (None, None)
    """
    if _UNSUPPORTED.search(command):
        return None
    parts = _heredoc_parts(command)
    if parts is None:
        return None
    pipelines: list[Pipeline] = []
    for line, heredoc in parts:
        tokens = _tokens(line)
        if tokens is None:
            return None
        current: Pipeline = []
        words: list[str] = []
        for token in tokens + [";"]:
            operator = bool(token) and token[0] in _OPERATOR and set(token) <= _OPERATOR
            kind = _separator(token) if operator and token not in _REDIRECTS else None
            if kind is None and operator and set(token) <= _GROUPING:
                return None  # subshells, background jobs
            if kind is None:
                words.append(token)
                continue
            if words:
                simple = _simple(words, heredoc and "<<" in words)
                if simple is None:
                    return None
                current.append(simple)
            elif kind == "pipe" or (current and kind == "list" and token.strip("\n;") in ("&&", "||")):
                return None  # `| x` with nothing before it, or `a && && b`
            words = []
            if kind == "list" and current:
                pipelines.append(current)
                current = []
    return pipelines or None
