"""Canonical rules for trivial differences (#19 item 1), tool checks (#19 item 2), the chosen spelling
(#19 item 5), and the exact → intent tiers of `vote` and of the student comparison (#11)."""

from __future__ import annotations

import pytest

from consensus.canonical import canonical, clean_action, equivalent
from consensus.intent_rules import IntentContext
from consensus.methods import compare, run_method, student_match
from consensus.similarity import similarity, similarity_matrix
from consensus.validity import invalid_reason, invalid_reasons, screen
from consensus.vote import vote
from ingestion.schema import Action, Proposal, ToolCall

CWD = "/repo"


def call(name: str, **arguments) -> Action:
    return Action(tool_calls=[ToolCall(id=f"id-{name}", name=name, arguments=arguments)])


def bash(command: str, **extra) -> Action:
    return call("Bash", command=command, **extra)


def prop(teacher: str, action: Action | None) -> Proposal:
    return Proposal(state_id="s", teacher=teacher, model=teacher, action=action,
                    error=None if action is not None else "x")


def pool(*actions: Action) -> list[Proposal]:
    return [prop(chr(ord("a") + i), action) for i, action in enumerate(actions)]


# --- #19 item 1: trivial differences fold into one canonical form -----------------------------------

TODO = {"content": "Fix the parser", "status": "in_progress", "activeForm": "Fixing the parser"}


@pytest.mark.parametrize("case, a, b", [
    ("trailing ; in Bash", bash("ls -la;"), bash("ls -la")),
    ("trailing ; after a closed heredoc", bash("git commit -m \"$(cat <<'EOF'\nfix\nEOF\n)\";"),
     bash("git commit -m \"$(cat <<'EOF'\nfix\nEOF\n)\"")),
    ("Write content and a trailing newline", call("Write", file_path="a.py", content="x = 1\n"),
     call("Write", file_path="a.py", content="x = 1")),
    ("Read offset 1 is the start", call("Read", file_path="a.py", offset=1), call("Read", file_path="a.py")),
    ("Grep -n true is the default", call("Grep", pattern="x", **{"-n": True}), call("Grep", pattern="x")),
    ("TodoWrite activeForm", call("TodoWrite", todos=[TODO]),
     call("TodoWrite", todos=[{**TODO, "activeForm": "Working on the parser"}])),
    ("parallel calls in another order",
     Action(tool_calls=[*bash("ls").tool_calls, *call("Read", file_path="a").tool_calls]),
     Action(tool_calls=[*call("Read", file_path="a").tool_calls, *bash("ls").tool_calls])),
    ("rollout editor's file_text newline", call("edit", command="create", path="a.py", file_text="x\n"),
     call("edit", command="create", path="a.py", file_text="x")),
    ("cd <relative cwd> &&", bash("cd work/tree && ls"), bash("ls")),
])
def test_trivial_differences_fold(case, a, b):
    cwd = "work/tree" if "relative" in case else CWD
    assert canonical(a, cwd) == canonical(b, cwd), case


@pytest.mark.parametrize("case, a, b", [
    ("find -exec's \\; is syntax", bash(r"find . -name '*.pyc' -exec rm {} \;"),
     bash("find . -name '*.pyc' -exec rm {}")),
    ("a ; inside a heredoc body is content", bash("cat > a.sh << EOF\necho hi;"),
     bash("cat > a.sh << EOF\necho hi")),
    ("Read offset 2 is not the start", call("Read", file_path="a.py", offset=2),
     call("Read", file_path="a.py")),
    ("Grep -n false is not the default", call("Grep", pattern="x", **{"-n": False}),
     call("Grep", pattern="x")),
    ("a todo's status matters", call("TodoWrite", todos=[TODO]),
     call("TodoWrite", todos=[{**TODO, "status": "completed"}])),
    ("Edit strings keep their newlines", call("Edit", file_path="a", old_string="x\n", new_string="y"),
     call("Edit", file_path="a", old_string="x", new_string="y")),
])
def test_meaningful_differences_stay(case, a, b):
    assert not equivalent(a, b, CWD), case


# --- #19 item 5: the chosen spelling ------------------------------------------------------------------

def test_chosen_is_cleaned_of_cd_cwd_only():
    action = bash("cd /repo && pytest  -q", description="Run the tests")
    cleaned = clean_action(action, CWD)
    assert cleaned.tool_calls[0].arguments == {"command": "pytest  -q", "description": "Run the tests"}
    assert clean_action(bash("cd src && ls"), CWD) == bash("cd src && ls")
    assert action.tool_calls[0].arguments["command"] == "cd /repo && pytest  -q"  # the input is untouched


def test_intent_winner_speaks_in_the_most_common_spelling():
    # a and e write `ls -F`/`tree`, b and c `ls -a`: the list intent wins 4 of 5, spelled `ls -a`.
    result = vote(pool(bash("ls -F"), bash("ls -a"), bash("ls -a", description="x"), bash("pwd"),
                       bash("tree")), CWD)
    assert result.reached and result.match == "intent" and result.agreement == 0.8
    assert result.action.tool_calls[0].arguments["command"] == "ls -a"
    assert result.winner_teachers == ["a", "b", "c", "e"] and result.groups[0].match == "intent"


def test_spelling_ties_go_to_teacher_order():
    result = vote(pool(bash("ls -F"), bash("ls -a"), bash("pwd")), CWD)
    assert result.match == "intent" and result.action.tool_calls[0].arguments["command"] == "ls -F"


# --- #19 item 2: proposals must use the state's tools -------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "Bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
         {"type": "function", "function": {"name": "Read", "parameters": {
             "type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}}]


@pytest.mark.parametrize("action, reason", [
    (bash("ls"), None),
    (Action(content="Done."), None),
    (call("shell", command="ls"), "unknown_tool: shell"),
    (call("Bash", cmd="ls"), "missing_argument: Bash.command"),
    (Action(tool_calls=[*bash("ls").tool_calls, *call("Read").tool_calls]),
     "missing_argument: Read.file_path"),
])
def test_invalid_reason(action, reason):
    assert invalid_reason(action, TOOLS) == reason


def test_invalid_proposals_never_win():
    # Two teachers agree on a tool the state does not have: screened, they are no votes at all.
    proposals = screen(pool(call("shell", command="ls"), call("shell", command="ls"), bash("pwd")), TOOLS)
    result = vote(proposals, CWD)
    assert result.reached and result.action == bash("pwd") and result.teachers == ["c"]
    assert invalid_reasons(proposals) == {"unknown_tool": 2}
    assert screen(proposals, TOOLS) == proposals  # idempotent
    assert screen(pool(call("shell")), []) == pool(call("shell"))  # no schemas recorded: nothing to check


# --- #11: tiers ----------------------------------------------------------------------------------------

def test_exact_tier_first_then_intent():
    exact = vote(pool(bash("ls -la"), bash("ls  -la"), bash("cat a.py")), CWD)
    assert exact.match == "exact" and exact.groups[0].match == "exact"
    spelled = pool(bash("cat a.py"), call("Read", file_path="/repo/a.py"), bash("sed -n 1,80p a.py"))
    assert not vote(spelled, CWD, match="exact").reached
    result = vote(spelled, CWD)
    assert result.reached and result.match == "intent" and result.agreement == 1.0
    assert result.intent == '[["read","a.py"]]'
    assert run_method("vote", spelled, CWD, match="exact").match is None


def test_intent_tier_keeps_its_own_ties_and_majorities():
    tie = vote(pool(bash("cat a.py"), bash("head a.py"), bash("ls"), bash("ls -a")), CWD)
    assert tie.reason == "tie" and [g.match for g in tie.groups] == ["intent", "intent"]
    split = vote(pool(bash("cat a.py"), bash("head a.py"), bash("ls"), bash("pwd")), CWD)
    assert split.reason == "no_majority" and split.agreement == 0.5


def test_edits_with_different_content_never_merge_in_a_vote():
    edit = lambda new: call("Edit", file_path="a.py", old_string="x", new_string=new)  # noqa: E731
    result = vote(pool(edit("y"), edit("z"), bash("ls")), CWD, context=IntentContext(CWD, []))
    assert not result.reached and result.reason == "tie"


def test_new_file_writes_merge_only_with_history_evidence():
    writes = pool(call("Write", file_path="reproduce.py", content="a"), call("Write", file_path="repro.py",
                                                                          content="b"), bash("ls"))
    assert vote(writes, CWD, context=IntentContext(CWD, [])).reached  # nothing seen: new scratch files
    seen = IntentContext(CWD, [{"role": "tool", "content": "repro.py reproduce.py"}])
    assert not vote(writes, CWD, context=seen).reached                 # both exist: their content differs
    assert not vote(writes, CWD).reached                               # no history given: stay exact


def test_student_is_compared_at_the_same_tiers():
    result = vote(pool(bash("ls -la"), bash("ls -la"), bash("pwd")), CWD)  # decided at the exact tier
    assert student_match(bash("ls -la", description="x"), result, CWD) == "exact"
    assert student_match(call("Glob", pattern="*"), result, CWD) is None
    assert student_match(bash("ls -F"), result, CWD) == "intent"        # same intent: not a pair
    assert compare(bash("ls -F"), result, CWD) == "agree"
    assert compare(bash("ls -F"), result, CWD, match="exact") == "pair"
    assert compare(bash("rm -rf build"), result, CWD) == "pair"


# --- #11 item 4: similarity over per-call values -------------------------------------------------------

def test_similarity_compares_values_not_the_envelope():
    forms = [canonical(bash(c), CWD) for c in ("create reproduce.java", "create reproduce.py")]
    assert similarity_matrix(forms)[0][1] == 0.5  # the envelope scored this 0.96
    reads = [canonical(call("Read", file_path=p), CWD) for p in ("tests/a.py", "tests/b.py")]
    assert similarity_matrix(reads)[0][1] == 0.5


def test_similarity_groups_keep_their_scores():
    props = pool(bash("pytest -q tests/test_a.py"), bash("pytest -q tests/test_a.py -x"),
                 bash("pytest -q tests/test_a.py"), call("Read", file_path="README.md"))
    result = similarity(props, CWD, threshold=0.8)
    assert result.reached and result.match == "similar" and result.groups[0].match == "similar"
    assert result.groups[0].scores == [1.0, 0.8571, 1.0]  # members a, b, c against the medoid
