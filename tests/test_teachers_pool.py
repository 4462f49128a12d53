"""TeacherPool end to end through litellm against the loopback OpenAI server: no mocks.

The shared conftest points REPLAY_CACHE at tmp_path and sets LITELLM_LOCAL_MODEL_COST_MAP=True.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ingestion.schema import Action, TraceState
from teachers import ResponseCache, RetryPolicy, TeacherPool, TeacherSpec, parse_pool
from teachers.redact_state import StateRedactor
from tests.llm_server import LLMServer, Reply, chat_completion, error_body, scripted

FAST = RetryPolicy(attempts=3, base_wait=0.01, max_wait=0.05)
BASH = {"type": "function", "function": {"name": "Bash", "description": "Run a shell command",
                                         "parameters": {"type": "object", "required": ["command"],
                                                        "properties": {"command": {"type": "string"}}}}}
TOOL_REPLY = chat_completion("", tool_calls=[{"id": "call_1", "name": "Bash",
                                              "arguments": {"command": "ls"}}])


def make_state(student: str | None = "claude-opus-4-6", extra: list[dict[str, Any]] | None = None,
               state_id: str = "claude_code:t:0") -> TraceState:
    messages = [{"role": "system", "content": "You are Claude Code."},
                {"role": "user", "content": "list the files"}, *(extra or [])]
    return TraceState(state_id=state_id, trace_id="t", turn=0, source="claude_code", messages=messages,
                      tools=[BASH], student_action=Action(content="ok"), student_model=student)


def teacher(url: str, name: str = "t", model: str = "openai/qwen3-coder", **extra: Any) -> TeacherSpec:
    return TeacherSpec(name=name, model=model, family="qwen", api_base=url, api_key="sk-test-SECRET123",
                       **extra)


def run(pool: TeacherPool, state: TraceState) -> list[Any]:
    return asyncio.run(pool.propose(state))


def test_answer_is_parsed_and_request_is_wire_form(tmp_path: Path) -> None:
    assistant = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "Bash", "arguments": {"command": "pwd"}}}]}
    state = make_state(extra=[assistant, {"role": "tool", "tool_call_id": "c0", "content": "/repo"}])
    with LLMServer(lambda request: Reply(TOOL_REPLY)) as server:
        pool = TeacherPool([teacher(server.url)], cache=ResponseCache(tmp_path / "c.sqlite"))
        [proposal] = run(pool, state)
    assert proposal.error is None and not proposal.cached
    assert proposal.action.tool_calls[0].name == "Bash"
    assert proposal.action.tool_calls[0].arguments == {"command": "ls"}
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (10, 5)
    body = server.requests[0]
    assert body["model"] == "qwen3-coder" and body["tools"] == [BASH]
    assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"command": "pwd"}'
    headers = {k.lower(): v for k, v in server.headers[0].items()}
    assert headers["authorization"] == "Bearer sk-test-SECRET123"  # the key is used, and stored nowhere


def test_same_family_teacher_is_never_asked(tmp_path: Path) -> None:
    with LLMServer(lambda request: Reply(chat_completion("ok"))) as server:
        pool_text = f"c=openai/claude-sonnet-4-5@{server.url},q=openai/qwen3-coder@{server.url}"
        pool = TeacherPool(parse_pool(pool_text), cache=ResponseCache(tmp_path / "a.sqlite"))
        proposals = run(pool, make_state("claude-opus-4-6"))
        assert [p.teacher for p in proposals] == ["q"]
        assert [r["model"] for r in server.requests] == ["qwen3-coder"]
        assert pool.stats.excluded_same_family == {"c": 1}
        allowed = TeacherPool(parse_pool(pool_text), cache=ResponseCache(tmp_path / "b.sqlite"),
                              allow_same_family=True)
        assert [p.teacher for p in run(allowed, make_state("claude-opus-4-6"))] == ["c", "q"]
        assert sorted(r["model"] for r in server.requests[1:]) == ["claude-sonnet-4-5", "qwen3-coder"]


def test_rate_limit_honours_retry_after_then_succeeds() -> None:
    limited = Reply(error_body("slow down", "rate_limit_error"), status=429, headers={"Retry-After": "1"})
    replies = scripted(limited, Reply(chat_completion("done")))
    with LLMServer(replies) as server:
        pool = TeacherPool([teacher(server.url)], retry=RetryPolicy(attempts=3, base_wait=0.01, max_wait=5))
        [proposal] = run(pool, make_state())
    assert proposal.action.content == "done" and len(server.requests) == 2
    assert pool.stats.retries == 1 and pool.stats.made == 1


class _Limited(Exception):
    status_code = 429

    def __init__(self, retry_after: str) -> None:
        super().__init__("slow down")
        self.litellm_response_headers = {"Retry-After": retry_after}


@pytest.mark.parametrize(("header", "low", "high"), [("1", 1.0, 1.1), ("120", 5.0, 5.0)])
def test_the_wait_is_what_the_server_asked_capped_by_max_wait(header: str, low: float, high: float) -> None:
    # The wait the retry policy chooses, computed, not timed: a timed test fails on a busy machine.
    from tenacity import RetryCallState

    from teachers.client import _wait

    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})
    state.set_exception((_Limited, _Limited(header), None))
    policy = RetryPolicy(attempts=3, base_wait=0.01, max_wait=5)
    assert all(low <= _wait(policy)(state) <= high for _ in range(20))


def test_server_error_is_retried() -> None:
    with LLMServer(scripted(Reply(error_body("boom"), status=500), Reply(chat_completion("fine")))) as server:
        pool = TeacherPool([teacher(server.url)], retry=FAST)
        [proposal] = run(pool, make_state())
    assert proposal.action.content == "fine" and len(server.requests) == 2
    assert (pool.stats.made, pool.stats.failed, pool.stats.retries) == (1, 0, 1)


def test_slow_answer_times_out_is_retried_then_fails(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    with LLMServer(lambda request: Reply(chat_completion("late"), delay=1.5)) as server:
        pool = TeacherPool([teacher(server.url)], cache=cache, timeout=0.5,
                           retry=RetryPolicy(attempts=2, base_wait=0.01, max_wait=0.05))
        [proposal] = run(pool, make_state())
        assert len(server.requests) == 2
    assert proposal.action is None and proposal.error.startswith("timeout")
    assert (pool.stats.failed, pool.stats.retries, pool.stats.made) == (1, 1, 0)
    assert len(cache) == 0  # a failure is not an answer: a re-run tries again


@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (404, "not_found"), (400, "bad_request")])
def test_client_errors_are_not_retried(status: int, kind: str) -> None:
    with LLMServer(lambda request: Reply(error_body("Incorrect API key provided: sk-test-SECRET123"),
                                         status=status)) as server:
        pool = TeacherPool([teacher(server.url)], retry=FAST)
        [proposal] = run(pool, make_state())
        assert len(server.requests) == 1
    assert proposal.error.startswith(kind) and "SECRET123" not in proposal.error
    assert (pool.stats.failed, pool.stats.retries) == (1, 0)


def test_connection_refused_is_retried_then_counted() -> None:
    with LLMServer() as server:
        url = server.url
    pool = TeacherPool([teacher(url)], retry=FAST)  # the server is gone: nothing listens on the port
    [proposal] = run(pool, make_state())
    assert proposal.error.startswith("connection") and "SECRET123" not in proposal.error
    assert (pool.stats.failed, pool.stats.retries) == (1, FAST.attempts - 1)


def test_context_window_error_is_not_retried() -> None:
    body = error_body("This model's maximum context length is 8192 tokens", "invalid_request_error",
                      "context_length_exceeded")
    with LLMServer(lambda request: Reply(body, status=400)) as server:
        [proposal] = run(TeacherPool([teacher(server.url)], retry=FAST), make_state())
        assert len(server.requests) == 1
    assert proposal.error.startswith("context_window")


def test_malformed_tool_arguments_are_invalid_not_a_crash(tmp_path: Path) -> None:
    bad = chat_completion("", tool_calls=[{"name": "Bash", "arguments": '{"command": "ls"'}])
    cache = ResponseCache(tmp_path / "c.sqlite")
    with LLMServer(lambda request: Reply(bad)) as server:
        pool = TeacherPool([teacher(server.url)], cache=cache, samples=2)
        proposals = run(pool, make_state())
    assert [(p.action, p.error) for p in proposals] == [(None, "invalid_tool_arguments")] * 2
    assert (pool.stats.made, pool.stats.invalid, pool.stats.failed) == (2, 2, 0)
    again = TeacherPool([teacher(server.url)], cache=cache, samples=2)
    assert [p.error for p in run(again, make_state())] == ["invalid_tool_arguments"] * 2
    assert (again.stats.cached, again.stats.invalid) == (2, 2)


def test_reasoning_goes_to_thinking_never_content() -> None:
    body = chat_completion("<think>inline thoughts</think>Run the tests.")
    body["choices"][0]["message"]["reasoning_content"] = "provider thoughts"
    with LLMServer(lambda request: Reply(body)) as server:
        [proposal] = run(TeacherPool([teacher(server.url)]), make_state())
    assert proposal.action.content == "Run the tests."
    assert "provider thoughts" in proposal.action.thinking and "inline thoughts" in proposal.action.thinking


def test_second_pool_on_the_same_cache_makes_no_request(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    with LLMServer(lambda request: Reply(TOOL_REPLY)) as server:
        first = run(TeacherPool([teacher(server.url)], cache=ResponseCache(path), samples=2), make_state())
        assert len(server.requests) == 2  # one per sample index
        pool = TeacherPool([teacher(server.url)], cache=ResponseCache(path), samples=2)
        second = run(pool, make_state())
        assert len(server.requests) == 2
    assert all(p.cached for p in second) and [p.action for p in second] == [p.action for p in first]
    assert (pool.stats.cached, pool.stats.made, pool.stats.cost_usd) == (2, 0, 0.0)


def test_planted_secrets_never_leave_the_machine(tmp_path: Path) -> None:
    secrets = {"sk-proj-PLANTEDq8Zr2Lk9Xw4Tn7Vb1Mc5Hd3Fg6Js0Ya", "AKIAPLANTEDQ7KZ3M2XW", "MIIEpPLANTEDbase64",
               "wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTEDKEY", "ghp_PLANTEDq8Zr2Lk9Xw4Tn7Vb1Mc5Hd3Fg6Js0"}
    env = ("     1→AWS_ACCESS_KEY_ID=AKIAPLANTEDQ7KZ3M2XW\n"
           "     2→AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTEDKEY\n     3→DEBUG=true")
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEpPLANTEDbase64xxxxxxxxxxxxxxxxxx\n-----END PRIVATE KEY-----"
    call = {"id": "r1", "type": "function", "function": {"name": "Read", "arguments": {"file_path": ".env"}}}
    push = {"id": "b1", "type": "function", "function": {"name": "Bash", "arguments": {
        "command": "git push https://ghp_PLANTEDq8Zr2Lk9Xw4Tn7Vb1Mc5Hd3Fg6Js0@github.com/o/r"}}}
    extra = [{"role": "assistant", "content": "", "tool_calls": [call]},
             {"role": "tool", "tool_call_id": "r1", "content": env},
             {"role": "assistant", "content": "", "tool_calls": [push]},
             {"role": "tool", "tool_call_id": "b1", "content": "export OPENAI_API_KEY="
                                                              "sk-proj-PLANTEDq8Zr2Lk9Xw4Tn7Vb1Mc5Hd3Fg6Js0Ya"},
             {"role": "user", "content": f"use this key:\n{pem}"}]
    cache = ResponseCache(tmp_path / "c.sqlite")
    redactor = StateRedactor(b"k")  # what replay.pipeline runs on every state before the pool sees it
    with LLMServer(lambda request: Reply(TOOL_REPLY)) as server:
        pool = TeacherPool([teacher(server.url)], cache=cache)
        run(pool, redactor(make_state(extra=extra)))
    sent = json.dumps(server.requests)
    assert "DEBUG=true" in sent and not [s for s in secrets if s in sent]
    assert redactor.counts == {"aws-access-token": 1, "aws-secret-key": 1, "github-pat": 1,
                               "openai-key": 1, "private-key-cut": 1}
    rows = sqlite3.connect(tmp_path / "c.sqlite").execute("SELECT * FROM responses").fetchall()
    assert rows and "SECRET123" not in repr(rows)  # the API key is in no cache row


def test_budget_stops_new_calls_but_serves_cache(tmp_path: Path) -> None:
    # priced as gpt-4o (a loopback endpoint is priced only by its spec); 1M prompt tokens cost dollars,
    # so one call exhausts $1.
    priced = chat_completion("ok", prompt_tokens=1_000_000)
    cache = ResponseCache(tmp_path / "c.sqlite")
    with LLMServer(lambda request: Reply(priced)) as server:
        spec = teacher(server.url, model="openai/gpt-4o", price="gpt-4o")
        pool = TeacherPool([spec], cache=cache, samples=3, per_teacher=1, max_cost=1.0)
        proposals = run(pool, make_state())
        assert len(server.requests) == 1
        assert [p.error for p in proposals] == [None, "budget_exhausted", "budget_exhausted"]
        assert pool.stats.budget_exhausted == 2 and pool.stats.cost_usd > 1.0
        assert len(server.requests) == 1 and proposals[0].cost_usd > 1.0
        # the answer already paid for is still served after the budget is gone
        assert asyncio.run(pool.ask(spec, make_state(), 0)).cached


def test_concurrency_is_bounded_per_teacher() -> None:
    lock, state = threading.Lock(), {"now": 0, "peak": 0}

    def slow(request: dict[str, Any]) -> Reply:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.1)
        with lock:
            state["now"] -= 1
        return Reply(chat_completion("ok"))

    with LLMServer(slow) as server:
        pool = TeacherPool([teacher(server.url)], samples=6, per_teacher=2, concurrency=16)
        assert all(p.error is None for p in run(pool, make_state()))
    assert state["peak"] == 2


def test_estimate_calls_nothing(tmp_path: Path) -> None:
    with LLMServer() as server:
        pool = TeacherPool([teacher(server.url, model="openai/gpt-4o", name="priced", price="gpt-4o"),
                            teacher(server.url)],
                           samples=2, cache=ResponseCache(tmp_path / "c.sqlite"))
        estimates = pool.estimate(make_state())
        assert server.requests == []
    assert [(e.teacher, e.calls, e.cached) for e in estimates] == [("priced", 2, 0), ("t", 2, 0)]
    assert all(e.prompt_tokens > 10 for e in estimates)
    assert estimates[0].cost_usd > 0 and estimates[1].cost_usd == 0.0  # unpriced model: tokens, no USD
