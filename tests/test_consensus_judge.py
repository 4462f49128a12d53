"""The judge prompt is blind and seeded; replies parse; the pick becomes a ConsensusResult."""

from __future__ import annotations

import pytest

from consensus.judge import build_judge_messages, judge_result, parse_judge_reply
from ingestion.schema import Action, Proposal, ToolCall

CONTEXT = [
    {"role": "system", "content": "You are a coding agent in /repo."},
    {"role": "user", "content": "The tests fail, fix them."},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "toolu_01abc", "type": "function",
         "function": {"name": "Bash", "arguments": {"command": "pytest"}}}]},
    {"role": "tool", "tool_call_id": "toolu_01abc", "content": "1 failed"},
]


def proposal(teacher: str, model: str, action: Action | None, call_id: str = "call_x") -> Proposal:
    if action is not None and action.tool_calls:
        action = Action(content=action.content, tool_calls=[c.model_copy(update={"id": call_id})
                                                            for c in action.tool_calls])
    return Proposal(state_id="s", teacher=teacher, model=model, action=action, error=None if action else "x")


def read(path: str) -> Action:
    return Action(tool_calls=[ToolCall(id="x", name="Read", arguments={"file_path": path})])


PROPOSALS = [
    proposal("gpt-5", "openai/gpt-5", read("tests/test_a.py"), "call_openai123"),
    proposal("deepseek", "deepseek/deepseek-chat", Action(content="Let me rerun with -x.",
             tool_calls=[ToolCall(id="x", name="Bash", arguments={"command": "pytest -x"})]), "call_ds456"),
    proposal("claude", "anthropic/claude-sonnet-4-5", read("/repo/tests/test_a.py"), "toolu_789"),
    proposal("qwen", "openrouter/qwen/qwen3-coder", read("src/a.py"), "qwen-call-1"),
    proposal("gemini", "gemini/gemini-2.5-pro", None),
]


def test_judge_prompt_is_blind():
    messages, order = build_judge_messages(CONTEXT, PROPOSALS, seed=7, cwd="/repo")
    assert [m["role"] for m in messages] == ["system", "user"]
    shown = "\n".join(m["content"] for m in messages)
    for p in PROPOSALS:
        assert p.teacher not in shown and p.model not in shown
    for word in ("openai", "anthropic", "deepseek", "qwen", "gemini", "call_", "toolu_"):
        assert word not in shown.lower()
    assert "pytest -x" in shown and '"file_path": "src/a.py"' in shown and "1 failed" in shown


def test_judge_shows_each_distinct_answer_once():
    _, order = build_judge_messages(CONTEXT, PROPOSALS, seed=7, cwd="/repo")
    # gpt-5 and claude read the same file: one candidate, spoken for by the lowest teacher name (claude).
    assert sorted(order) == [1, 2, 3]
    _, no_cwd = build_judge_messages(CONTEXT, PROPOSALS, seed=7)
    assert sorted(no_cwd) == [0, 1, 2, 3]


def test_judge_order_is_seeded_and_independent_of_answer_order():
    first = build_judge_messages(CONTEXT, PROPOSALS, seed="claude_code:t:3", cwd="/repo")
    again = build_judge_messages(CONTEXT, PROPOSALS, seed="claude_code:t:3", cwd="/repo")
    assert first == again
    orders = {tuple(build_judge_messages(CONTEXT, PROPOSALS, seed=s, cwd="/repo")[1]) for s in range(20)}
    assert len(orders) > 1  # the seed really shuffles
    permutation = (4, 2, 0, 3, 1)  # the teachers answered in another order
    _, order = build_judge_messages(CONTEXT, [PROPOSALS[i] for i in permutation], seed=3, cwd="/repo")
    assert [permutation[i] for i in order] == build_judge_messages(CONTEXT, PROPOSALS, seed=3, cwd="/repo")[1]


@pytest.mark.parametrize("reply, expected", [
    ("Candidate 2 reruns the tests.\nANSWER: 2", 1),
    ("answer: 1", 10),
    ("**ANSWER:** Candidate 3", 30),
    ("ANSWER: 1\n...on reflection...\nANSWER: 3", 30),
    ("3", 30),
    ("ANSWER: 4", None),
    ("ANSWER: 0", None),
    ("I cannot decide.", None),
    ("", None),
    (None, None),
])
def test_parse_judge_reply(reply, expected):
    assert parse_judge_reply(reply, [10, 1, 30]) == expected


def test_judge_result():
    messages, order = build_judge_messages(CONTEXT, PROPOSALS, seed=1, cwd="/repo")
    pick = parse_judge_reply(f"ANSWER: {order.index(2) + 1}", order)
    result = judge_result(PROPOSALS, pick, cwd="/repo")
    assert result.reached and result.method == "judge"
    assert result.action == PROPOSALS[2].action
    assert result.winner_teachers == ["claude", "gpt-5"]
    assert result.teachers == ["claude", "deepseek", "gpt-5", "qwen"]
    assert result.agreement == 0.5 and result.groups[0].teachers == ["claude", "gpt-5"]


def test_judge_result_without_a_choice():
    assert judge_result(PROPOSALS, None).reason == "judge_no_choice"
    assert judge_result(PROPOSALS, 4).reason == "judge_no_choice"  # a failed proposal cannot win
