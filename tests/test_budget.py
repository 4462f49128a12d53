"""Fitting at ingestion (--max-length, issue #17 item 1), tools per trace (item 2) and the message fixes
chat templates need (#19 item 3), on sessions built in the tests."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ingestion.budget import Budget, trim_start
from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from ingestion.tokens import MESSAGE_OVERHEAD, TokenCounter
from tests.sessions import assistant, envelope, text, tool_result, tool_use, user, write_session
from tests.tiny_model import build_tokenizer


def ingest(path: Path, **options) -> tuple[list, IngestStats]:
    stats = IngestStats()
    return list(iter_states(path, IngestOptions(**options), stats)), stats


def long_session(turns: int = 40, output: str = "y" * 2000, big: int | None = None) -> list[dict]:
    """A first prompt, then `turns` Bash calls each answered by `output` (turn `big` by 10,000 chars)."""
    records = [user("u0", None, "first task: make the tests pass")]
    parent = "u0"
    for i in range(turns):
        result = "z" * 10_000 if i == big else f"{i}:{output}"
        records += [assistant(f"a{i}", parent, f"msg_{i}", tool_use(f"toolu_{i}", f"step {i}")),
                    user(f"r{i}", f"a{i}", tool_result(f"toolu_{i}", result))]
        parent = f"r{i}"
    return [*records, assistant("end", parent, "msg_end", text("done"))]


def prompt_tokens(state, counter: TokenCounter) -> int:
    return counter.tools(state.tools) + sum(counter.message(m) for m in state.messages)


def test_states_fit_max_length_in_large_steps(tmp_path: Path) -> None:
    states, stats = ingest(write_session(tmp_path, long_session(big=5)), max_length=8192)
    counter = TokenCounter()
    options = IngestOptions(max_length=8192)
    assert len(states) == 41 and stats.budget["states_trimmed"] > 20
    assert not stats.budget["states_over_max_length"]
    trims = []
    for state in states:
        messages = state.messages
        assert messages[0]["role"] == "system" and messages[1]["content"] == "first task: make the tests pass"
        assert messages[-1]["role"] != "assistant"  # what the turn answers is always kept
        called = {c["id"] for m in messages for c in m.get("tool_calls") or ()}
        answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
        assert called == answered  # never a call without its result, nor a result without its call
        if len(messages) > 2:
            assert messages[2]["role"] == "assistant"  # roles alternate after the first user message
        action = counter.message(state.student_action.to_message())
        assert prompt_tokens(state, counter) + max(action, options.completion_reserve()) <= 8192
        trims.append(messages[2]["tool_calls"][0]["id"] if len(messages) > 2 else None)
    # The 10,000-character result is cut to head + tail once, the same in every state that shows it.
    cut = {m["content"] for s in states for m in s.messages if m.get("tool_call_id") == "toolu_5"}
    assert len(cut) == 1 and "characters cut" in cut.pop()
    # Large steps: an exchange is ~530 tokens, a step ~2,700: the trim point stays put for runs of
    # several states, and within a run each prompt extends the previous one exactly.
    moves = [i for i in range(1, len(trims)) if trims[i] != trims[i - 1] and trims[i - 1] is not None]
    runs = [b - a for a, b in zip(moves, moves[1:], strict=False)]
    extends = sum(b.messages[1:len(a.messages)] == a.messages[1:]
                  for a, b in zip(states, states[1:], strict=False))
    assert 3 <= len(moves) <= 10 and min(runs) >= 4
    assert extends == len(states) - 1 - len(moves)
    dropped = [s.metadata.get("dropped_messages", 0) for s in states]  # how others tell trim points
    assert moves == [i for i in range(1, len(dropped)) if dropped[i] != dropped[i - 1]]


def test_without_max_length_nothing_is_trimmed(tmp_path: Path) -> None:
    states, stats = ingest(write_session(tmp_path, long_session(turns=10)))
    assert not stats.budget["states_trimmed"]
    assert len(states[-1].messages) == 2 + 2 * 10


def test_an_action_longer_than_the_length_is_counted_never_lost(tmp_path: Path) -> None:
    write = {"type": "tool_use", "id": "toolu_w", "name": "Write",
             "input": {"file_path": "/repo/big.py", "content": "x = 1\n" * 5000}}
    records = [user("u0", None, "write the file"), assistant("a0", "u0", "msg_0", write)]
    states, stats = ingest(write_session(tmp_path, records), max_length=2048)
    assert len(states) == 1 and stats.budget["states_over_max_length"] == 1
    assert states[0].student_action.tool_calls[0].arguments["content"] == "x = 1\n" * 5000  # untouched


def test_a_tokenizer_counts_when_given(tmp_path: Path) -> None:
    tokenizer = build_tokenizer(tmp_path / "tok")
    session = write_session(tmp_path / "s", long_session(output="pytest -q tests/test_app.py " * 40))
    states, stats = ingest(session, max_length=8192, tokenizer=str(tmp_path / "tok"))
    counter = TokenCounter(tokenizer)
    estimated, _ = ingest(session, max_length=8192)
    assert stats.budget["states_trimmed"] and not stats.budget["states_over_max_length"]
    for state in states:
        assert prompt_tokens(state, counter) + 1024 <= 8192
    # This tokenizer makes more tokens of the text than 4 characters each: it keeps less history.
    assert sum(len(s.messages) for s in states) < sum(len(s.messages) for s in estimated)


def running(sizes: list[int], roles: list[str]) -> tuple[list[int], list[int]]:
    """`trim_start`'s inputs: running sums of the sizes and the assistant positions."""
    cum = [0]
    for size in sizes:
        cum.append(cum[-1] + size)
    return cum, [i for i, role in enumerate(roles) if role == "assistant"]


def trim_by_walking(sizes: list[int], roles: list[str], head: int, excess: int, step: int) -> int:
    """The rule of `ingestion.budget`'s docstring, walked message by message (the oracle)."""
    if excess <= 0:
        return head
    target = -(-excess // max(step, 1)) * max(step, 1)
    offset, last = 0, head
    for index in range(head, len(sizes)):
        if roles[index] == "assistant" and index > head:
            if offset >= target:
                return index
            last = index
        offset += sizes[index]
    return last


@pytest.mark.parametrize(("excess", "expected"), [(0, 2), (1, 4), (100, 4), (101, 6), (300, 6)])
def test_trim_points_lie_on_a_grid(excess: int, expected: int) -> None:
    roles = ["system", "user"] + ["assistant", "tool"] * 3 + ["user"]
    sizes = [10, 10] + [50, 50] * 3 + [10]
    assert trim_start(*running(sizes, roles), 2, excess, step=100) == expected


@pytest.mark.parametrize("seed", range(20))
def test_trim_by_binary_search_equals_walking_the_history(seed: int) -> None:
    rng = random.Random(seed)
    kinds = ["assistant", "tool", "user"]
    roles = ["system", "user"] + [rng.choice(kinds) for _ in range(rng.randrange(0, 40))]
    sizes = [rng.randrange(0, 300) for _ in roles]
    cum, assistants = running(sizes, roles)
    for excess in (0, 1, *(rng.randrange(0, cum[-1] + 2) for _ in range(30))):
        step = rng.randrange(1, 500)
        assert trim_start(cum, assistants, 2, excess, step) == trim_by_walking(sizes, roles, 2, excess, step)


def test_fitting_a_growing_trace_reuses_sums_and_fits_as_a_fresh_budget_would() -> None:
    """States of a trace extend each other, with a rewind (another branch) in the middle: the budget
    that carries its running sums from state to state fits each one exactly as a new budget does."""
    rng = random.Random(7)
    system, first = {"role": "system", "content": "s" * 400}, {"role": "user", "content": "task"}
    branch = [system, first]
    states = []
    for turn in range(120):
        if turn == 60:
            branch = branch[:30]   # the user rewound: a shorter history on another branch
        branch = branch + [{"role": "assistant", "content": "a" * rng.randrange(0, 4000)},
                           {"role": "tool", "content": "t" * rng.randrange(0, 12_000)}]
        states.append([dict(system), *branch[1:]])   # a new system dict each state, as the reader builds
    options = IngestOptions(max_prompt_tokens=20_000)
    carried = Budget(options)
    fitted = [carried.fit(messages, []) for messages in states]
    assert fitted == [Budget(options).fit(messages, []) for messages in states]
    assert sum(dropped for _, dropped, _ in fitted) > 0   # the trim really ran


def test_budget_memoises_message_sizes() -> None:
    budget = Budget(IngestOptions(max_length=1000))
    message = {"role": "user", "content": "x" * 400}
    assert budget.size(message) == 100 + MESSAGE_OVERHEAD
    message_copy = dict(message, content="y")
    assert budget.size(message_copy) == 1 + MESSAGE_OVERHEAD  # another object, its own size


# --- tools per trace (#17 item 2) ------------------------------------------------------------------

def shape(*names: str) -> dict:
    tools = [{"name": n, "description": f"{n} tool", "input_schema": {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
        "properties": {"x": {"type": "string"}}}} for n in names]
    return {"type": "api-request-shape", "sessionId": "s", "shape": {"tools": tools}}


def test_one_tool_list_per_trace_from_the_recorded_shapes(tmp_path: Path) -> None:
    mcp = {"type": "tool_use", "id": "toolu_m", "name": "mcp__gh__issue", "input": {"repo": "a/b"}}
    records = [shape("Bash", "Read"), user("u0", None, "go"),
               assistant("a0", "u0", "msg_0", tool_use("toolu_0", "ls")),
               user("r0", "a0", tool_result("toolu_0", "a.py")), shape("Read", "Write", "Bash"),
               assistant("a1", "r0", "msg_1", mcp), user("r1", "a1", tool_result("toolu_m", "ok")),
               assistant("a2", "r1", "msg_2", text("done"))]
    states, _ = ingest(write_session(tmp_path, records))
    names = [t["function"]["name"] for t in states[0].tools]
    assert names == ["Bash", "Read", "Write", "mcp__gh__issue"]  # recorded order, then the rest used
    assert all(s.tools == states[0].tools for s in states)
    assert "$schema" not in str(states[0].tools)


def test_without_shapes_the_default_set_plus_what_was_used(tmp_path: Path) -> None:
    mcp = {"type": "tool_use", "id": "toolu_m", "name": "mcp__gh__issue", "input": {"repo": "a/b"}}
    records = [user("u0", None, "go"), assistant("a0", "u0", "msg_0", text("Looking.")),
               user("u1", "a0", "then file it"), assistant("a1", "u1", "msg_1", mcp)]
    states, _ = ingest(write_session(tmp_path, records))
    names = [t["function"]["name"] for t in states[0].tools]
    assert names[0] == "Bash" and names[-1] == "mcp__gh__issue"
    assert states[0].tools == states[1].tools  # the tool used later is offered from the first state on


# --- message fixes templates need (#19 item 3) ---------------------------------------------------------

def interrupted_session() -> list[dict]:
    return [
        user("u0", None, "list the files"),
        assistant("a0", "u0", "msg_0", {**tool_use("toolu_0", "ls"), "name": "Bash"}),
        user("r0", "a0", [*tool_result("toolu_0", "a.py"), text("[Request interrupted by user]")]),
        user("u1", "r0", "only python files please"),
        assistant("a1", "u1", "msg_1", text("\n\n\nThere is one: a.py.\n\n")),
        envelope("x", "a1", "system", "2025-11-17T11:00:02.000Z", subtype="stop_hook_summary"),
        user("u2", "x", "thanks"),
        assistant("a2", "u2", "msg_2", text("You're welcome.")),
    ]


def test_tool_names_blank_lines_and_alternating_roles(tmp_path: Path) -> None:
    states, _ = ingest(write_session(tmp_path, interrupted_session()))
    assert states[1].student_action.content == "There is one: a.py."
    last = states[-1].messages
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "user", "assistant", "user"]
    assert last[3] == {"role": "tool", "tool_call_id": "toolu_0", "name": "Bash", "content": "a.py"}
    assert last[4]["content"] == "[Request interrupted by user]\n\nonly python files please"
    assert last[5]["content"] == "There is one: a.py."
    assert states[1].messages == last[:len(states[1].messages)]  # merging keeps the prefix property


def test_collected_rollouts_get_tool_names_and_budgets(tmp_path: Path) -> None:
    from tests.test_rollouts import FINAL, write

    path = write(tmp_path / "toy__calc-1.run1.rollout.jsonl", FINAL)
    states, _ = ingest(path)
    assert states[1].messages[-1]["name"] == "bash" and states[1].messages[-1]["tool_call_id"] == "c0"
    fitted, stats = ingest(path, max_length=8192)
    assert [s.messages for s in fitted] == [s.messages for s in states]  # they fit: nothing cut
    _, stats = ingest(path, max_length=400)
    assert stats.budget["states_over_max_length"] == 2  # the agent's tool schemas alone are longer
