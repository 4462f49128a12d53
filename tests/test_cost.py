"""Cost from the usage providers return: cached input at the cached price, per provider shape, against
prefix-caching loopback servers (tests/caching_server.py) through the real litellm path."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ingestion.schema import Action, TraceState
from teachers import ResponseCache, TeacherPool, parse_pool
from teachers.cost import Tokens, cost_of, unpriced_reason
from teachers.prompt_cache import CacheRules, PrefixModel
from teachers.request import BREAKPOINTS, call_options
from tests.caching_server import PromptCache, caching_server

# Published prices, USD per million tokens (input, cached input, cache write, output).
PRICES = {"gpt-5": (1.25, 0.125, None, 10.0), "deepseek-chat": (0.28, 0.028, None, 0.42),
          "claude-sonnet-4-6": (3.0, 0.3, 3.75, 15.0)}


def ledger_cost(ledger: list[dict[str, Any]]) -> float:
    """What the usage the server returned costs at the published prices, computed by hand."""
    total = 0.0
    for row in ledger:
        price_in, price_cached, price_write, price_out = PRICES[row["model"]]
        u = row["usage"]
        if "input_tokens" in u:  # Anthropic: three disjoint parts
            total += (u["input_tokens"] * price_in + u["cache_read_input_tokens"] * price_cached
                      + u["cache_creation_input_tokens"] * price_write + u["output_tokens"] * price_out)
        else:
            details = u.get("prompt_tokens_details") or {}
            cached = u.get("prompt_cache_hit_tokens", details.get("cached_tokens", 0))
            total += ((u["prompt_tokens"] - cached) * price_in + cached * price_cached
                      + u["completion_tokens"] * price_out)
    return total / 1e6


STUDENT = "Qwen/Qwen3-Coder-30B-A3B-Instruct"  # of no teacher's family


def trace(turns: int = 4, trace_id: str = "t") -> list[TraceState]:
    """A trace whose every state extends the one before: a long task, then an exchange per turn."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " * 20},
                                      {"role": "user", "content": "Fix the bug. " + "context line\n" * 900}]
    states = []
    for turn in range(turns):
        states.append(TraceState(state_id=f"claude_code:{trace_id}:{turn}", trace_id=trace_id, turn=turn,
                                 source="claude_code", messages=list(messages), tools=[],
                                 student_action=Action(content=f"step {turn}"), student_model=STUDENT))
        messages += [{"role": "assistant", "content": f"step {turn}"},
                     {"role": "user", "content": f"result {turn}\n" + "output line\n" * 150}]
    return states


def ask_in_order(pool: TeacherPool, states: list[TraceState]) -> list[Any]:
    async def go() -> list[Any]:
        return [p for state in states for p in await pool.propose(state)]

    return asyncio.run(go())


@pytest.mark.parametrize(("flavor", "entry", "model"), [
    ("openai", "g=openai/gpt-5@{url}#price=gpt-5", "gpt-5"),
    ("deepseek", "d=deepseek/deepseek-chat@{url}#price=deepseek/deepseek-chat", "deepseek-chat"),
    ("anthropic", "c=anthropic/claude-sonnet-4-6@{base}#price=anthropic/claude-sonnet-4-6",
     "claude-sonnet-4-6"),
])
def test_cost_is_the_returned_usage_at_cached_prices(tmp_path: Path, flavor: str, entry: str,
                                                     model: str) -> None:
    server, cache = caching_server(flavor)
    with server:
        spec = parse_pool(entry.format(url=server.url, base=server.url.removesuffix("/v1")))[0]
        pool = TeacherPool([spec], cache=ResponseCache(tmp_path / "c.sqlite"))
        proposals = ask_in_order(pool, trace())
    assert [p.error for p in proposals] == [None] * 4
    assert {row["model"] for row in cache.ledger} == {model}
    billed = ledger_cost(cache.ledger)
    assert sum(p.cost_usd for p in proposals) == pytest.approx(billed, rel=1e-9)
    assert pool.stats.cost_usd == pytest.approx(billed, rel=1e-9)
    # every state after the first read the previous one from the provider's cache
    cached = pool.stats.teacher(spec.name).cached_prompt_tokens
    assert 0 < cached < pool.stats.prompt_tokens
    assert pool.stats.to_report()["tokens"]["cached_prompt"] == cached
    full_price = cost_of(spec, Tokens(pool.stats.prompt_tokens, pool.stats.completion_tokens))
    assert billed < 0.6 * full_price


def test_anthropic_requests_carry_breakpoints_on_system_and_latest_message(tmp_path: Path) -> None:
    server, _ = caching_server("anthropic")
    with server:
        spec = parse_pool(f"c=anthropic/claude-sonnet-4-6@{server.url.removesuffix('/v1')}#price=0")[0]
        ask_in_order(TeacherPool([spec], cache=ResponseCache(tmp_path / "c.sqlite")), trace(2))
    for body in server.requests:
        assert [b.get("cache_control") for b in body["system"]] == [{"type": "ephemeral"}]
        marked = [i for i, m in enumerate(body["messages"]) for b in m["content"] if "cache_control" in b]
        assert marked == [len(body["messages"]) - 1]


def test_a_custom_endpoint_named_like_a_real_model_is_not_priced_as_it(tmp_path: Path) -> None:
    server, cache = caching_server("openai")
    with server:
        named = parse_pool(f"g=openai/gpt-5@{server.url}")[0]
        pool = TeacherPool([named], cache=ResponseCache(tmp_path / "c.sqlite"))
        proposals = ask_in_order(pool, trace(2))
    assert ledger_cost(cache.ledger) > 0  # it would cost money at gpt-5's price
    assert [p.cost_usd for p in proposals] == [0.0, 0.0] and pool.stats.prompt_tokens > 0
    assert pool.unpriced() == {"g": unpriced_reason(named)}
    assert "custom endpoint without a price" in pool.unpriced()["g"]


@pytest.mark.parametrize(("entry", "priced"), [
    ("gpt-5", True), ("deepseek", True), ("g=openai/gpt-5@http://127.0.0.1:9/v1", False),
    ("g=openai/gpt-5@http://127.0.0.1:9/v1#price=gpt-5", True),
    ("v=openai/my-model@http://127.0.0.1:9/v1#price=0", True),
    ("v=openai/my-model@http://127.0.0.1:9/v1#price=0.5/1.5/0.05", True),
])
def test_what_is_priced(entry: str, priced: bool) -> None:
    assert (unpriced_reason(parse_pool(entry)[0]) is None) == priced


def test_explicit_prices_per_million_tokens() -> None:
    spec = parse_pool("v=openai/my-model@http://127.0.0.1:9/v1#price=1/2/0.1")[0]
    assert cost_of(spec, Tokens(prompt=1_000_000, completion=1_000_000, cached=500_000)) == pytest.approx(
        0.5 * 1 + 0.5 * 0.1 + 2)
    assert cost_of(spec, Tokens(prompt=1_000_000), batch=True) == pytest.approx(0.5)


def test_the_dry_run_model_reads_the_previous_state_from_the_cache() -> None:
    gpt5 = parse_pool("gpt-5")[0]
    model, states = PrefixModel(), trace(3)
    first, second, third = (model.predict(gpt5, s.trace_id, s.messages, s.tools) for s in states)
    assert first.cached == 0 and first.prompt > 2_000
    assert second.cached > 0 and second.cached % 128 == 0 and second.prompt - second.cached < 700
    assert third.cached > second.cached
    # another trace starts cold
    assert model.predict(gpt5, "other", states[1].messages, []).cached == 0


@pytest.mark.parametrize(("shared", "cached"), [(0, 0), (1023, 0), (1024, 1024), (1151, 1024), (1152, 1152)])
def test_openai_caches_in_128_token_steps_above_1024(shared: int, cached: int) -> None:
    assert CacheRules(1024, 128).cached(shared) == cached


def test_the_server_forgets_after_its_ttl() -> None:
    now = [0.0]
    cache = PromptCache("openai", ttl=300, clock=lambda: now[0])
    body = {"model": "gpt-5", "messages": [{"role": "user", "content": "x " * 3000}]}
    assert cache.serve("gpt-5", body, 1)["prompt_tokens_details"]["cached_tokens"] == 0
    now[0] = 299
    assert cache.serve("gpt-5", body, 1)["prompt_tokens_details"]["cached_tokens"] > 0
    now[0] = 700
    assert cache.serve("gpt-5", body, 1)["prompt_tokens_details"]["cached_tokens"] == 0
    assert cache.serve("gpt-4o", body, 1)["prompt_tokens_details"]["cached_tokens"] == 0  # per model


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-6", "vertex_ai/claude-sonnet-4-5",
                                   "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"])
def test_anthropic_family_teachers_get_breakpoints_wherever_they_are_served(model: str) -> None:
    assert call_options(model, None, "t")["cache_control_injection_points"] == [dict(p) for p in BREAKPOINTS]


def test_bedrock_requests_carry_cache_points(monkeypatch: pytest.MonkeyPatch) -> None:
    from litellm.types.utils import CallTypes
    from litellm.utils import return_raw_request

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTONLY")  # signs locally; nothing is sent
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-only")
    monkeypatch.setenv("AWS_REGION_NAME", "us-east-1")
    model = "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "go"},
                {"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    body = return_raw_request(CallTypes.completion, {"model": model, "messages": messages, "max_tokens": 10,
                                                      **call_options(model, None, "t")})["raw_request_body"]
    assert body["system"][-1] == {"cachePoint": {"type": "default"}}
    assert body["messages"][-1]["content"][-1] == {"cachePoint": {"type": "default"}}
    assert all("cachePoint" not in str(m) for m in body["messages"][:-1])


def test_openai_gets_a_prompt_cache_key_per_trace_that_hides_the_trace() -> None:
    one, two = (call_options("gpt-5", None, t)["prompt_cache_key"] for t in ("session-a", "session-b"))
    assert one != two and "session" not in one
    assert one == call_options("gpt-5", None, "session-a")["prompt_cache_key"]


@pytest.mark.parametrize("entry", ["g=openai/m@http://127.0.0.1:9/v1#price=no-such-model-xyz",
                                   "g=openai/m@http://127.0.0.1:9/v1#price=1/2/3/4/5",
                                   "g=openai/m@http://127.0.0.1:9/v1#price=-1/2"])
def test_a_bad_price_is_one_clear_error(entry: str) -> None:
    from teachers.registry import TeacherConfigError

    with pytest.raises(TeacherConfigError, match="price"):
        parse_pool(entry)
