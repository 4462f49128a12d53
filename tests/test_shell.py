"""consensus.shell: the fast tokenizer gives shlex's tokens, and commands split as the shell would."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from consensus.shell import _PUNCTUATION, _fast_tokens, split_command
from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats

LINES = ["grep 'a b' \"c d\"", "echo \"it's\"", "x'y'z", "'unbalanced", "a\"b c\"d", "ls '' x",
         "grep -rn \"foo|bar\" . | head -5", "awk '{print $1}' f", "echo \"$HOME\"", "a#b c", "x  'y'\"z\"",
         "mix test 2>&1 | tail -5", "a&&b||c;d", "cmd >/dev/null 2>&1 &", "f(x)", "echo \"a;b\" ; ls"]


def _shlex(line: str) -> list[str] | None:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=_PUNCTUATION)
    lexer.whitespace, lexer.whitespace_split, lexer.commenters = " \t\r", True, ""
    try:
        return list(lexer)
    except ValueError:
        return None


def test_fast_tokens_are_shlex_tokens(fixtures_root: Path) -> None:
    lines = list(LINES)
    for state in iter_states(fixtures_root, IngestOptions(), IngestStats()):
        for call in state.student_action.tool_calls:
            if isinstance(call.arguments.get("command"), str):
                lines += call.arguments["command"].split("\n")
    checked = 0
    for line in lines:
        if "\\" in line:
            continue  # escapes always go to shlex
        fast = _fast_tokens(line)
        assert fast is None and _shlex(line) is None or fast == _shlex(line), line
        checked += fast is not None
    assert checked > 100


@pytest.mark.parametrize("command, argvs", [
    ("ls -la", [["ls -la"]]),
    ("cd src && pytest -q; git status", [["cd src"], ["pytest -q"], ["git status"]]),
    ("grep -rn 'a b' . | head -3", [["grep -rn a b .", "head -3"]]),
    ("FOO=1 BAR=2 make test", [["make test"]]),
    ("cat > r.py << 'EOF'\nimport os\nEOF\npython r.py", [["cat"], ["python r.py"]]),
])
def test_split_command(command, argvs):
    pipelines = split_command(command)
    assert [[" ".join(s.argv) for s in p] for p in pipelines] == argvs


@pytest.mark.parametrize("command", ["echo $(date)", "ls `pwd`", "sleep 5 &", "(cd src; ls)",
                                     "if true; then ls; fi", "diff <(ls a) <(ls b)",
                                     "cat <<EOF\nnever closed", "echo 'open"])
def test_unsupported_syntax_keeps_the_exact_form(command):
    assert split_command(command) is None
