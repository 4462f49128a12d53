"""Canonical forms, equivalence, `vote`, `similarity` and `compare` on hand-built proposal sets."""

from __future__ import annotations

import pytest

from consensus.canonical import canonical, equivalent, fold_shell, load_rules, normalize_path
from consensus.methods import ConsensusError, compare, get_method, run_method
from consensus.similarity import similarity
from consensus.vote import vote
from ingestion.schema import Action, Proposal, ToolCall

CWD = "/repo"


def call(name: str, **arguments) -> Action:
    return Action(tool_calls=[ToolCall(id=f"id-{name}", name=name, arguments=arguments)])


def bash(command: str, **extra) -> Action:
    return call("Bash", command=command, **extra)


def text(content: str) -> Action:
    return Action(content=content)


def prop(teacher: str, action: Action | None, sample: int = 0, error: str | None = None) -> Proposal:
    return Proposal(state_id="s", teacher=teacher, model=f"m/{teacher}", sample=sample, action=action,
                    error=error if action is None else None)


def pool(*actions: Action | None) -> list[Proposal]:
    """One proposal per action from teachers a, b, c, ..."""
    return [prop(chr(ord("a") + i), action) for i, action in enumerate(actions)]


# --- canonical form ----------------------------------------------------------------------------------

@pytest.mark.parametrize("a, b", [
    (bash("ls   -la"), bash("ls -la")),
    (bash("ls -la", description="List files", timeout=60000), bash("ls -la")),
    (bash("ls -la\n"), bash("  ls -la")),
    (bash("cd /repo && pytest -q"), bash("pytest   -q")),
    (bash("cat /repo/src/a.py"), bash("cat src/a.py")),
    (bash("ls -la", run_in_background=False), bash("ls -la")),
    (call("Read", file_path="/repo/a.py"), call("Read", file_path="a.py")),
    (call("Read", file_path="./a.py"), call("Read", file_path="a.py")),
    (call("Read", file_path="/repo/src/../a.py"), call("Read", file_path="a.py")),
    (call("Edit", file_path="/repo/a.py", old_string="x", new_string="y", replace_all=False),
     call("Edit", new_string="y", old_string="x", file_path="a.py")),
    (call("Glob", pattern="**/*.py", path="/repo"), call("Glob", pattern="**/*.py")),
    (call("Task", description="Find it", prompt="Fix"), call("Task", description="x", prompt="Fix")),
    (text("All tests PASS."), text("  all tests\n pass. ")),
    (Action(content="Let me look.", tool_calls=call("Read", file_path="a.py").tool_calls),
     Action(content="Reading the file", tool_calls=call("Read", file_path="/repo/a.py").tool_calls)),
])
def test_equivalent(a, b):
    assert equivalent(a, b, CWD)
    assert canonical(a, CWD) == canonical(b, CWD)


@pytest.mark.parametrize("a, b", [
    (bash("ls -la"), bash("ls -l")),
    (bash("echo 'a  b'"), bash("echo 'a b'")),                  # quoted whitespace matters
    (bash("sleep 9", run_in_background=True), bash("sleep 9")),  # background is a different action
    (call("Read", file_path="/repo/a.py"), call("Read", file_path="/other/a.py")),
    (call("Read", file_path="a.py"), call("Write", file_path="a.py")),
    (call("Edit", file_path="a.py", old_string="x  ", new_string="y"),
     call("Edit", file_path="a.py", old_string="x", new_string="y")),   # file text is not folded
    (text("Done."), bash("echo Done.")),
    (bash("ls"), Action(tool_calls=[ToolCall(id="1", name="Bash", arguments={"command": "ls"}),
                                    ToolCall(id="2", name="Bash", arguments={"command": "pwd"})])),
])
def test_not_equivalent(a, b):
    assert not equivalent(a, b, CWD)


def test_parallel_calls_are_a_multiset():
    # Calls of one turn run concurrently: their order says nothing (issue #19). Their count does.
    ls, pwd = bash("ls").tool_calls[0], bash("pwd").tool_calls[0]
    assert equivalent(Action(tool_calls=[ls, pwd]), Action(tool_calls=[pwd, ls]))
    assert not equivalent(Action(tool_calls=[ls, pwd]), Action(tool_calls=[ls, pwd, ls]))


def test_canonical_is_hashable_and_stable():
    form = canonical(call("Grep", pattern="x", path="/repo/src", **{"-i": True}), CWD)
    assert form == '{"calls":[{"arguments":{"-i":true,"path":"src","pattern":"x"},"name":"Grep"}]}'
    assert len({form, canonical(call("Grep", **{"-i": True}, path="src", pattern="x"), CWD)}) == 1


def test_without_cwd_paths_are_only_normalised():
    assert normalize_path("./a/./b.py") == "a/b.py"
    assert not equivalent(call("Read", file_path="/repo/a.py"), call("Read", file_path="a.py"))


@pytest.mark.parametrize("command, folded", [
    ("ls   -la", "ls -la"),
    ("a  &&\n\n  b", "a &&\nb"),
    ('grep  "x   y"   f', 'grep "x   y" f'),
    ("echo a\\ \\ b", "echo a\\ \\ b"),
    ("cat > f.py <<'EOF'\ndef f():\n    return 1\nEOF\n", "cat > f.py <<'EOF'\ndef f():\n    return 1\nEOF"),
])
def test_fold_shell(command, folded):
    assert fold_shell(command) == folded


def test_rules_are_data():
    rules = load_rules()
    assert "description" in rules.tools["Bash"].ignore
    assert rules.for_tool("mcp__x__y") is rules.default


# --- vote -----------------------------------------------------------------------------------------

def test_vote_majority_with_differently_written_equivalents():
    result = vote([prop("a", bash("ls   -la", description="List")), prop("b", bash("ls -la")),
                   prop("c", bash("pwd"))], CWD)
    assert result.reached and result.method == "vote"
    assert result.winner_teachers == ["a", "b"] and result.teachers == ["a", "b", "c"]
    assert result.agreement == pytest.approx(2 / 3)
    assert result.action == bash("ls   -la", description="List")   # lowest teacher name speaks
    assert list(result.votes.values()) == [2.0, 1.0]


def test_vote_paths_absolute_vs_relative():
    result = vote(pool(call("Read", file_path="/repo/a.py"), call("Read", file_path="./a.py"),
                       call("Read", file_path="b.py")), CWD)
    assert result.reached and result.winner_teachers == ["a", "b"]


def test_vote_tie_abstains():
    result = vote(pool(bash("ls"), bash("ls"), bash("pwd"), bash("pwd")))
    assert not result.reached and result.reason == "tie" and result.action is None
    assert result.agreement == 0.5 and len(result.groups) == 2


def test_vote_all_abstain_and_all_invalid():
    assert vote([prop("a", bash("ls")), prop("b", bash("pwd")), prop("c", text("hi"))]).reason == "tie"
    nothing = vote([prop("a", None, error="rate_limit"), prop("b", None, error="invalid_tool_arguments")])
    assert (nothing.reached, nothing.reason, nothing.teachers) == (False, "no_votes", [])
    assert nothing.agreement == 0.0
    assert vote([]).reason == "no_votes"


def test_vote_one_teacher_is_a_majority_of_one():
    result = vote([prop("a", bash("ls"))])
    assert result.reached and result.agreement == 1.0


def test_invalid_proposals_are_not_votes():
    result = vote([prop("a", bash("ls")), prop("b", None, error="timeout"), prop("c", None, error="bad")])
    assert result.reached and result.teachers == ["a"] and result.agreement == 1.0


def test_vote_no_strict_majority():
    result = vote(pool(bash("ls"), bash("ls"), bash("pwd"), text("x")))
    assert not result.reached and result.reason == "no_majority"  # 2 of 4: half is not more than half
    result = vote(pool(bash("ls"), bash("ls"), bash("pwd"), bash("x"), bash("y")))
    assert not result.reached and result.reason == "no_majority" and result.agreement == pytest.approx(0.4)


def test_vote_min_agreement():
    three = [prop("a", bash("ls")), prop("b", bash("ls")), prop("c", bash("pwd"))]
    assert vote(three, min_agreement=0.5).reached
    assert not vote(three, min_agreement=0.7).reached
    assert vote(three, min_agreement=0.3).reached
    with pytest.raises(ValueError):
        vote(three, min_agreement=1.0)


def test_vote_is_independent_of_input_order():
    props = [prop("c", bash("ls")), prop("a", bash("ls  ")), prop("b", bash("pwd"))]
    forward, backward = vote(props), vote(list(reversed(props)))
    assert forward.action == backward.action == bash("ls  ")   # teacher a's, whatever the order
    assert forward.votes == backward.votes and forward.winner_teachers == backward.winner_teachers


def test_vote_samples_share_one_teacher_weight():
    # a answers ls twice, b ls once, c pwd and ls: ls 1 + 1 + 1/2, pwd 1/2, of 3 teachers.
    props = [prop("a", bash("ls"), 0), prop("a", bash("ls"), 1), prop("b", bash("ls")),
             prop("c", bash("pwd"), 0), prop("c", bash("ls"), 1)]
    result = vote(props)
    assert result.reached and result.agreement == pytest.approx(2.5 / 3)
    assert result.votes == {'{"calls":[{"arguments":{"command":"ls"},"name":"Bash"}]}': 2.5,
                            '{"calls":[{"arguments":{"command":"pwd"},"name":"Bash"}]}': 0.5}
    # A failed sample leaves the teacher's weight on the samples that did answer.
    result = vote([prop("a", bash("ls"), 0), prop("a", None, 1, error="x"), prop("b", bash("pwd"))])
    assert result.reason == "tie"


# --- similarity -----------------------------------------------------------------------------------

def test_similarity_groups_near_misses_and_takes_the_medoid():
    props = [prop("a", bash("pytest -q tests/test_a.py")), prop("b", bash("pytest -q tests/test_a.py -x")),
             prop("c", bash("pytest -q tests/test_a.py")), prop("d", call("Read", file_path="README.md"))]
    assert not vote(props, CWD, match="exact").reached  # 2 of 4 exactly alike
    result = similarity(props, CWD, threshold=0.8)
    assert result.reached and result.winner_teachers == ["a", "b", "c"]
    assert result.action == bash("pytest -q tests/test_a.py") and result.agreement == 0.75


def test_similarity_never_mixes_tools():
    props = [prop("a", call("Read", file_path="a.py")), prop("b", call("Write", file_path="a.py"))]
    result = similarity(props, threshold=0.1)
    assert not result.reached and result.reason == "tie"


def test_similarity_threshold_one_is_vote():
    props = [prop("a", bash("ls")), prop("b", bash("ls ")), prop("c", bash("pwd"))]
    assert similarity(props, threshold=1.0).winner_teachers == vote(props).winner_teachers == ["a", "b"]


def test_similarity_abstains():
    assert similarity([]).reason == "no_votes"
    props = [prop("a", text("alpha")), prop("b", text("omega zeta")), prop("c", bash("ls"))]
    assert similarity(props).reason == "tie"
    props = pool(text("alpha"), text("alpha"), text("beta"), text("x"))
    assert not similarity(props, min_agreement=0.6).reached


# --- compare and registry -------------------------------------------------------------------------

def test_compare():
    result = vote([prop("a", bash("ls -la")), prop("b", bash("ls  -la"))], CWD)
    assert compare(bash("ls -la", description="x"), result, CWD) == "agree"
    assert compare(bash("rm -rf build"), result, CWD) == "pair"
    assert compare(bash("ls -la"), vote([]), CWD) == "abstain"


def test_registry():
    assert run_method("similarity", [prop("a", bash("ls"))]).method == "similarity"
    with pytest.raises(ConsensusError, match="vote, similarity, judge"):
        get_method("majority")
    with pytest.raises(ConsensusError, match="LLM call"):
        get_method("judge")
