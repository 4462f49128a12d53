"""Issue #55, item 1: what the redaction pass (teachers/redact_state.py) and the writer (ingestion/store.py)
reuse from one state for the next is reused only when it is the same JSON, not merely `==`: a state's
tools and messages are byte for byte what its request carried, whatever came before it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingestion.exact import same_json, same_prefix
from ingestion.schema import Action, TraceState
from ingestion.store import load_states, write_states
from teachers.redact_state import StateRedactor

KEY = b"k" * 32


def tool(order: str, limit: Any = 1) -> dict[str, Any]:
    """The same bash tool, its function's keys in `order` (n: name, d: description, p: parameters)."""
    parts = {"n": ("name", "bash"), "d": ("description", "Run a command"),
             "p": ("parameters", {"type": "object", "properties": {"command": {"type": "string"}},
                                  "maxItems": limit})}
    return {"type": "function", "function": dict(parts[key] for key in order)}


# Pairs Python's == takes for one another, and JSON does not.
VARIANTS = [
    pytest.param(tool("ndp"), tool("npd"), id="key-order"),
    pytest.param(tool("ndp", 1), tool("ndp", 1.0), id="1-and-1.0"),
    pytest.param(tool("ndp", 1), tool("ndp", True), id="1-and-true"),
    pytest.param(tool("ndp", 1.0), tool("ndp", True), id="1.0-and-true"),
]


def state(trace: str, turn: int, tools: list[dict[str, Any]],
          messages: list[dict[str, Any]] | None = None) -> TraceState:
    return TraceState(state_id=f"agl_spans:{trace}:{turn}", trace_id=trace, turn=turn, source="agl_spans",
                      messages=messages or [{"role": "user", "content": "fix calc.py"}], tools=tools,
                      student_action=Action(content="ok"))


def dumped(value: Any) -> str:
    return json.dumps(value)   # key order kept, 1 / 1.0 / true written apart


@pytest.mark.parametrize(("first", "second"), VARIANTS)
def test_equal_tool_lists_of_another_json_are_not_reused(first: dict[str, Any],
                                                         second: dict[str, Any]) -> None:
    assert [first] == [second] and dumped([first]) != dumped([second])   # what fooled the old check
    redactor = StateRedactor(KEY)
    # one trace, then another (the Anthropic-API rollout between OpenAI ones), then the first kind again
    states = [state("a", 0, [first]), state("a", 1, [first]), state("b", 0, [second]),
              state("b", 1, [second]), state("c", 0, [first])]
    for original in states:
        assert dumped(redactor(original).tools) == dumped(original.tools)


@pytest.mark.parametrize(("first", "second"), VARIANTS)
def test_a_resent_history_of_another_json_keeps_its_own_bytes(first: dict[str, Any],
                                                              second: dict[str, Any]) -> None:
    # a rollout whose next request carries the earlier tool call again, its arguments written otherwise
    asked = {"role": "user", "content": "fix calc.py"}
    history = [[asked, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}]}]
        for arguments in (first, second)]
    states = [state("r", 0, [], [asked]), state("r", 1, [], history[0]),
              state("r", 2, [], history[1] + [{"role": "tool", "tool_call_id": "c1", "content": "ok"}])]
    assert states[2].messages[:2] == states[1].messages and dumped(states[2].messages[:2]) != dumped(
        states[1].messages)
    redactor = StateRedactor(KEY)
    redacted = [redactor(s) for s in states]
    for original, out in zip(states, redacted, strict=True):
        assert dumped(out.messages) == dumped(original.messages)


@pytest.mark.parametrize(("first", "second"), VARIANTS)
def test_the_writer_stores_each_state_as_it_came(tmp_path: Path, first: dict[str, Any],
                                                 second: dict[str, Any]) -> None:
    # with and without the redaction pass before it (--no-redact): the writer reuses a history's
    # indices and tool lists only for the same JSON too
    messages = [[{"role": "user", "content": "x", "n": value}] for value in (first, second)]
    states = [state("w", 0, [first], messages[0]), state("w", 1, [second], messages[1] + [messages[1][0]]),
              state("w", 2, [first], messages[0] + [messages[1][0]])]
    redactor = StateRedactor(KEY)
    for name, written in (("raw", states), ("redacted", [redactor(s) for s in states])):
        write_states(written, tmp_path / name)
        loaded = list(load_states(tmp_path / name))
        for original, back in zip(states, loaded, strict=True):
            assert dumped(back.tools) == dumped(original.tools)
            assert dumped(back.messages) == dumped(original.messages)


@pytest.mark.parametrize(("a", "b", "same"), [
    ({"x": 1, "y": 2}, {"x": 1, "y": 2}, True), ({"x": 1, "y": 2}, {"y": 2, "x": 1}, False),
    ([1], [1.0], False), ([1], [True], False), ([0.0], [-0.0], False), ([1], [2], False),
    ({1: "key that is no string"}, {1: "key that is no string"}, False),   # no JSON form: not reused
])
def test_same_json(a: Any, b: Any, same: bool) -> None:
    assert same_json(a, b) is same
    assert same_json(a, a) is True   # the very object


def test_same_prefix() -> None:
    one, other = {"role": "user", "content": "a", "n": 1}, {"role": "user", "content": "a", "n": 1.0}
    assert same_prefix([one, {"role": "assistant"}], [one])
    assert same_prefix([dict(one)], [one])             # an equal copy, same JSON
    assert not same_prefix([other], [one])
    assert not same_prefix([one], [])                   # nothing to reuse
    assert not same_prefix([one], [one, one])
