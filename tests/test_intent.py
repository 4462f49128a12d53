"""Intent keys on a labelled table of proposal pairs (issue #11): same intent, or a different one.

Each row is two actions a teacher could take at one state, labelled by hand. The state's history
has seen `setup.py`, `src/parser.py` and `src/config.py` (listed and read): writes to those are
edits of existing files, while `reproduce.py` and friends would be new scratch files.
"""

from __future__ import annotations

import posixpath
from collections import Counter

import pytest

from consensus.intent import intent
from consensus.intent_rules import IntentContext
from ingestion.schema import Action, ToolCall

CWD = "/repo"
HISTORY = [
    {"role": "user", "content": "The parser drops quoted fields. Please create reproduce.py to show it."},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": {"command": "ls"}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "README.md\nsetup.py\nsrc\ntests"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "Read",
                                                       "arguments": {"file_path": "/repo/src/config.py"}}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "     1\tfrom src.parser import parse\n"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c3", "type": "function", "function": {"name": "Glob",
                                                       "arguments": {"pattern": "src/*.py"}}}]},
    {"role": "tool", "tool_call_id": "c3", "content": "/repo/src/parser.py\n/repo/src/config.py"},
]
CONTEXT = IntentContext(CWD, HISTORY)


def calls(*pairs: tuple[str, dict]) -> Action:
    return Action(tool_calls=[ToolCall(id=f"t{i}", name=name, arguments=args) for i, (name, args) in
                              enumerate(pairs)])


def call(name: str, **arguments) -> Action:
    return calls((name, arguments))


def B(command: str) -> Action:  # noqa: N802 - Claude Code's Bash
    return call("Bash", command=command, description="run it")


def sh(command: str) -> Action:  # the rollout agent's bash
    return call("bash", command=command)


def R(path: str, **extra) -> Action:  # noqa: N802
    return call("Read", file_path=path, **extra)


def W(path: str, content: str) -> Action:  # noqa: N802
    return call("Write", file_path=path, content=content)


def E(path: str, old: str, new: str, **extra) -> Action:  # noqa: N802
    return call("Edit", file_path=path, old_string=old, new_string=new, **extra)


def G(pattern: str, **extra) -> Action:  # noqa: N802
    return call("Grep", pattern=pattern, **extra)


def GL(pattern: str, **extra) -> Action:  # noqa: N802
    return call("Glob", pattern=pattern, **extra)


def view(command: str, path: str, **extra) -> Action:  # SWE-agent's editor
    return call("str_replace_editor", command=command, path=path, **extra)


def edit(command: str, path: str, **extra) -> Action:  # the rollout agent's editor
    return call("edit", command=command, path=path, **extra)


def text(content: str) -> Action:
    return Action(content=content)


SAME, DIFFERENT = True, False

# (family, a, b, same intent?)
TABLE = [
    # --- list --------------------------------------------------------------------------------------
    ("list", B("ls -F"), B("ls -a"), SAME),
    ("list", B("ls -la"), call("LS", path="/repo"), SAME),
    ("list", B("ls src/"), call("LS", path="/repo/src"), SAME),
    ("list", B("tree -L 2"), B("ls"), SAME),
    ("list", B("find . -maxdepth 1"), B("ls -la"), SAME),
    ("list", sh("ls -la"), B("ls 2>/dev/null"), SAME),
    ("list", B("ls src"), B("ls tests"), DIFFERENT),
    ("list", B("rm -rf build"), B("ls build"), DIFFERENT),
    ("list", B("ls && rm -rf build"), B("ls"), DIFFERENT),
    # --- read --------------------------------------------------------------------------------------
    ("read", R("src/parser.py"), B("cat src/parser.py"), SAME),
    ("read", B("cat /repo/src/parser.py"), B("sed -n 1,200p src/parser.py"), SAME),
    ("read", B("head -n 100 src/parser.py"), R("/repo/src/parser.py", offset=1, limit=100), SAME),
    ("read", B("nl -ba src/parser.py"), B("cat -n src/parser.py"), SAME),
    ("read", view("view", "/repo/src/parser.py"), B("less src/parser.py"), SAME),
    ("read", B("cat src/parser.py | head -50"), R("src/parser.py"), SAME),
    ("read", sh("sed -n '10,60p' src/parser.py"), R("src/parser.py", offset=10, limit=50), SAME),
    ("read", B("cat src/parser.py"), B("cat src/config.py"), DIFFERENT),
    ("read", R("src/parser.py"), R("src/config.py"), DIFFERENT),
    ("read", view("view", "src/parser.py"), view("view", "src"), DIFFERENT),
    ("read", B("sed -i 's/a/b/' src/parser.py"), B("sed -n 1,20p src/parser.py"), DIFFERENT),
    # --- locate ------------------------------------------------------------------------------------
    ("locate", GL("**/TypeParser.java"), G("TypeParser"), SAME),
    ("locate", B("grep -rn 'class TypeParser' ."), G("class TypeParser", path="src"), SAME),
    ("locate", B("rg TypeParser"), B("git grep -n TypeParser"), SAME),
    ("locate", B("find . -name 'TypeParser.java'"), GL("**/TypeParser.java"), SAME),
    ("locate", B("grep -rn parse_args --include=*.py ."), B("grep -rn 'def parse_args' src | head -20"),
     SAME),
    ("locate", G("parse_args", output_mode="content", **{"-n": True}), B("ag parse_args"), SAME),
    ("locate", B("find src -name '*.py'"), GL("**/*.py"), SAME),
    ("locate", sh("grep -rn 'TypeParser(' /repo/src"), B("rg -t java TypeParser"), SAME),
    ("locate", GL("**/TypeParser.java"), GL("**/TokenParser.java"), DIFFERENT),
    ("locate", B("grep -rn foo src"), B("grep -rn bar src"), DIFFERENT),
    ("locate", G("TypeParser"), B("ls -la"), DIFFERENT),
    # --- run tests ---------------------------------------------------------------------------------
    ("test", B("pytest tests/test_parser.py"), B("python -m pytest -q tests/test_parser.py"), SAME),
    ("test", B("python3 -m pytest tests/test_parser.py -x -v 2>&1 | tail -30"),
     sh("pytest tests/test_parser.py"), SAME),
    ("test", B("cd /repo && pytest -k parse tests"), B("pytest tests -k parse --tb=short"), SAME),
    ("test", B("go test ./..."), B("go test -v ./..."), SAME),
    ("test", B("npm test"), B("npm run test"), SAME),
    ("test", B("cargo test parser"), B("cargo test parser -- --nocapture"), SAME),
    ("test", B("timeout 300 pytest tests/test_parser.py"), B("uv run pytest tests/test_parser.py"), SAME),
    ("test", B("mvn test -Dtest=ParserTest"), B("mvn -q test -Dtest=ParserTest"), SAME),
    ("test", B("pytest tests/a.py"), B("pytest tests/b.py"), DIFFERENT),
    ("test", B("pytest tests/a.py"), B("pytest tests/a.py::test_one"), DIFFERENT),
    ("test", B("pytest"), B("pytest tests/a.py"), DIFFERENT),
    ("test", text("Done."), B("pytest"), DIFFERENT),
    # --- run a program -----------------------------------------------------------------------------
    ("run", B("python reproduce.py"), B("python3 reproduce.py"), SAME),
    ("run", B("./run.sh"), B("bash run.sh"), SAME),
    ("run", sh("python reproduce.py 2>&1"), B("python reproduce.py | head -40"), SAME),
    ("run", B("python reproduce.py"), B("python check.py"), DIFFERENT),
    ("run", B("ls"), B("python reproduce.py"), DIFFERENT),
    # --- git inspection ----------------------------------------------------------------------------
    ("git", B("git status"), B("git status --short"), SAME),
    ("git", B("git diff"), B("git --no-pager diff --stat"), SAME),
    ("git", B("git log --oneline -10"), B("git log -5"), SAME),
    ("git", B("git show HEAD"), B("git show --stat HEAD"), SAME),
    ("git", B("git diff"), B("git log"), DIFFERENT),
    ("git", B("git status"), B("git commit -am wip"), DIFFERENT),
    ("git", B("git show HEAD"), B("git show HEAD~1"), DIFFERENT),
    # --- create a scratch file (extension kept, name ignored) ---------------------------------------
    ("create", W("reproduce.java", "class A {}"), W("Reproduce.java", "public class B {}"), SAME),
    ("create", W("/tmp/test_repro.py", "import parser"), W("repro.py", "print(1)"), SAME),
    ("create", B("cat > reproduce.py << 'EOF'\nimport sys\nEOF"), W("repro.py", "print(1)"), SAME),
    ("create", edit("create", "reproduce.py", file_text="x"), W("check.py", "y"), SAME),
    ("create", view("create", "repro.py", file_text=""), B("echo 'print(1)' > repro_bug.py"), SAME),
    ("create", W("reproduce.py", "x"), W("reproduce.java", "x"), DIFFERENT),
    ("create", W("repro.py", "x"), W("src/helpers.py", "x"), DIFFERENT),
    ("create", B("touch notes.md"), W("notes.txt", ""), DIFFERENT),
    # --- writes and edits of existing files: their content is the substance ------------------------
    ("write", W("src/parser.py", "x = 1\n"), W("/repo/src/parser.py", "x = 1"), SAME),
    ("write", W("src/parser.py", "new content"), W("parser_new.py", "new content"), DIFFERENT),
    ("write", W("src/parser.py", "A"), W("src/parser.py", "B"), DIFFERENT),
    ("write", B("cat > setup.py << EOF\nsetup()\nEOF"), W("new_setup.py", "setup()"), DIFFERENT),
    ("edit", E("/repo/src/parser.py", "a", "b", replace_all=False), E("src/parser.py", "a", "b"), SAME),
    ("edit", E("src/parser.py", "x", "y"), E("src/parser.py", "x", "z"), DIFFERENT),
    ("edit", E("src/parser.py", "x", "y"), E("src/config.py", "x", "y"), DIFFERENT),
    ("edit", edit("str_replace", "src/parser.py", old_str="a", new_str="b"),
     edit("str_replace", "src/parser.py", old_str="a", new_str="c"), DIFFERENT),
    ("edit", call("MultiEdit", file_path="src/parser.py", edits=[{"old_string": "a", "new_string": "b"}]),
     call("MultiEdit", file_path="src/parser.py", edits=[{"old_string": "a", "new_string": "B"}]), DIFFERENT),
    # --- compound commands: they map only when every part does -------------------------------------
    ("compound", B("ls && git status"), B("ls -la; git status -s"), SAME),
    ("compound", B("cd /repo && ls -la && cat setup.py"), B("ls; cat ./setup.py"), SAME),
    ("compound", B("ls && git status"), B("git status"), DIFFERENT),
    # --- other tools ---------------------------------------------------------------------------------
    ("todo", call("TodoWrite", todos=[{"content": "Fix", "status": "pending", "activeForm": "Fixing"}]),
     call("TodoWrite", todos=[{"content": "Fix the bug", "status": "in_progress",
                               "activeForm": "Fixing it"}]),
     SAME),
    ("delegate", call("Task", description="find", prompt="Find where X is parsed", subagent_type="Explore"),
     call("Task", description="search", prompt="Search for X parsing", subagent_type="Explore"), SAME),
    ("delegate", call("Task", description="a", prompt="Find X", subagent_type="Explore"),
     call("Task", description="a", prompt="Find X", subagent_type="general-purpose"), DIFFERENT),
    ("fetch", call("WebFetch", url="https://docs.python.org/3/library/shlex.html", prompt="quoting"),
     call("WebFetch", url="http://docs.python.org/3/library/shlex.html/", prompt="how to quote"), SAME),
    ("search", call("WebSearch", query="python shlex quoting"), call("WebSearch", query="bashlex parse tree"),
     DIFFERENT),
    ("reply", text("Done, the tests pass."), text("All fixed: 12 passed."), SAME),
    ("parallel", calls(("Read", {"file_path": "src/parser.py"}), ("Read", {"file_path": "src/config.py"})),
     calls(("Read", {"file_path": "src/config.py"}), ("Bash", {"command": "cat src/parser.py"})), SAME),
    ("parallel", R("src/parser.py"),
     calls(("Read", {"file_path": "src/parser.py"}), ("Read", {"file_path": "src/config.py"})), DIFFERENT),
    # --- honest misses: the same purpose, but no rule says so, so the tier keeps them apart -----------
    ("miss", B("pip install -e ."), B("python -m pip install -e ."), SAME),
]


def classify(a: Action, b: Action) -> bool:
    return intent(a, CONTEXT) == intent(b, CONTEXT)


def test_table_is_large_and_covers_every_family():
    assert len(TABLE) >= 60
    families = Counter(family for family, *_ in TABLE)
    for family in ("list", "read", "locate", "test", "run", "git", "create", "write", "edit", "compound"):
        assert families[family] >= 2, family
    assert sum(same for *_, same in TABLE) >= 25 and sum(not same for *_, same in TABLE) >= 25


def test_at_least_95_percent_classified_as_labelled():
    wrong = [(family, a, b, same) for family, a, b, same in TABLE if classify(a, b) != same]
    share = 1 - len(wrong) / len(TABLE)
    assert share >= 0.95, f"{share:.1%} right; wrong: {wrong}"


@pytest.mark.parametrize("family, a, b, same", [row for row in TABLE if row[0] in ("edit", "write")])
def test_edits_and_writes_with_different_content_never_merge(family, a, b, same):
    assert classify(a, b) == same


def test_intent_is_coarser_than_canonical():
    # Canonically equal actions always share an intent key: every exact group lies in one intent group.
    from consensus.canonical import canonical

    for _, a, b, _ in TABLE:
        if canonical(a, CWD) == canonical(b, CWD):
            assert classify(a, b)


def test_without_history_a_write_keeps_its_exact_form():
    # No evidence that the file is new: never merge two writes of different content.
    blind = IntentContext(CWD)
    assert intent(W("reproduce.py", "a"), blind) != intent(W("repro.py", "b"), blind)
    assert intent(W("/tmp/a.py", "a"), blind) == intent(W("/tmp/b.py", "b"), blind)  # /tmp is scratch


# --- the caches and fast paths of the hot path (issue #29): same keys as computed afresh ------------------

def test_a_key_that_reads_the_history_is_never_served_from_the_cache() -> None:
    unseen, seen = IntentContext("/repo", []), IntentContext("/repo", [{"role": "tool", "content": "fix.py"}])
    write = W("fix.py", "print(1)\n")
    for order in ((unseen, seen, unseen), (seen, unseen, seen)):
        keys = [intent(write, context) for context in order]
        assert keys[0] == keys[2] != keys[1]
    assert intent(B("cat a.py"), IntentContext("/repo", [])) == intent(B("cat /other/a.py"),
                                                                        IntentContext("/other", []))


def test_cached_canonical_calls_keep_types_apart() -> None:
    from consensus.canonical import canonical

    forms = [canonical(call("mcp__db__query", limit=value)) for value in (1, True, 1.0, 1, True)]
    assert forms[0] == forms[3] and forms[1] == forms[4] and len(set(forms)) == 3


def test_fast_paths_agree_with_the_walks() -> None:
    import random

    from consensus.canonical import _fold_walk, fold_shell, normalize_path

    rng = random.Random(29)
    alphabet = [*"ab/.~-_;&|=()", " ", "  ", "\t", "\n", "\r", "\x0b", "\x1c", "\xa0", "\u2028", "\u3000"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(14)))
        assert fold_shell(text) == _fold_walk(text), repr(text)
        # Paths under the cwd, written with it or with ./, take normalize_path's shortcuts.
        text = rng.choice(["", "", "./", "/repo/", "/repo", "repo/", "./repo/", "//repo/", "/repo/./"]) + text
        for cwd in ("/repo", "/", "repo", ".", "/repo/", "repo/."):
            root = posixpath.normpath(cwd)
            full = posixpath.normpath(posixpath.join(root, text.strip()))
            if text.strip() and not text.strip().startswith("~"):
                walk = "." if full == root else full.removeprefix(root.rstrip("/") + "/")
                assert normalize_path(text, cwd) == walk, (repr(text), cwd)
