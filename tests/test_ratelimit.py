"""Pacing to a provider's stated limits (#28): a loopback provider enforcing OpenAI's RPM/TPM rules and
headers (tests/ratelimit_server.py), asked through the real litellm path. Counts of 429s, not times."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ingestion.schema import Action, TraceState
from teachers import ResponseCache, RetryPolicy, TeacherPool, TeacherSpec
from teachers.ratelimit import Limiter, stated_limits
from tests.llm_server import Reply
from tests.ratelimit_server import Limits, counted_tokens, rate_limited_server
from tests.test_teachers_pool import BASH, TOOL_REPLY

PATIENT = RetryPolicy(attempts=8, base_wait=0.2, max_wait=10)


def states(n: int, chars: int = 4000) -> list[TraceState]:
    """`n` one-state traces of about chars/4 tokens each, all free to be asked at once."""
    return [TraceState(state_id=f"claude_code:t{i}:0", trace_id=f"t{i}", turn=0, source="claude_code",
                       messages=[{"role": "system", "content": "You are Claude Code."},
                                 {"role": "user", "content": f"task {i}: " + "x" * chars}],
                       tools=[BASH], student_action=Action(content="ok"), student_model="claude-opus-4-6")
            for i in range(n)]


def ask_all(url: str, tmp_path: Path, adaptive: bool, n: int) -> TeacherPool:
    spec = TeacherSpec(name="t", model="openai/m", family="qwen", api_base=url, api_key="sk-test")
    pool = TeacherPool([spec], cache=ResponseCache(tmp_path / f"{adaptive}.sqlite"), concurrency=16,
                       per_teacher=16, adaptive=adaptive, retry=PATIENT)

    async def go() -> list[list]:
        return await asyncio.gather(*(pool.propose(s) for s in states(n)))

    answers = asyncio.run(go())
    assert all(p.error is None for ps in answers for p in ps)
    return pool


@pytest.mark.parametrize("tpm", [12_000, 24_000])
def test_paced_run_stays_under_the_limit_where_fixed_concurrency_is_refused(tmp_path: Path, tpm: int) -> None:
    """40 calls of ~1,000 tokens against `tpm` per 2 s: the whole run does not fit the first bucket, so
    it must wait for the limit; fixed concurrency 16 is answered 429 again and again."""
    answer = lambda body: Reply(TOOL_REPLY, delay=0.1)  # noqa: E731
    with rate_limited_server(limits := Limits(rpm=100_000, tpm=tpm, window=2.0), answer) as server:
        pool = ask_all(server.url, tmp_path, True, 40)
    assert limits.admitted == 40
    assert limits.rejected == 0, limits.log  # < 1% of 40
    report = pool.stats.to_report()["per_teacher"]["t"]
    assert report["rate_limited"] == 0 and report["tokens_per_minute"] > 0
    assert pool.pacing()["t"]["stated_limits"] == {"requests": 100_000, "tokens": tpm}
    with rate_limited_server(fixed := Limits(rpm=100_000, tpm=tpm, window=2.0), answer) as server:
        pool = ask_all(server.url, tmp_path, False, 40)
    # What pacing saves. A count, not a time, but how many of fixed concurrency's calls land in a full
    # bucket still depends on how fast this machine sends them (9 of 40 on a loaded 2-core machine,
    # 20 and more on a quiet one): refused at all is the claim.
    assert fixed.admitted == 40 and fixed.rejected > 0


def test_requests_limit_is_followed_too(tmp_path: Path) -> None:
    answer = lambda body: Reply(TOOL_REPLY, delay=0.05)  # noqa: E731
    with rate_limited_server(limits := Limits(rpm=10, tpm=10_000_000, window=1.0), answer) as server:
        ask_all(server.url, tmp_path, True, 30)
    assert limits.admitted == 30 and limits.rejected == 0


def test_window_halves_on_429_and_grows_on_clean_answers() -> None:
    limiter = Limiter(8)

    async def go() -> list[float]:
        seen = []
        for status in (200, 200, 200, 429, 200):
            ticket = await limiter.acquire(10)
            await limiter.release(ticket, {}, status, retry_after=0.0)
            seen.append(limiter.window)
        return seen

    assert asyncio.run(go()) == [3.0, 4.0, 5.0, 2.5, 2.9]
    assert limiter.rate_limited == 1


def test_headers_of_both_providers_and_the_servers_count_agree() -> None:
    openai = stated_limits({"x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "29000",
                            "x-ratelimit-reset-tokens": "2s", "x-ratelimit-limit-requests": "500",
                            "x-ratelimit-remaining-requests": "499", "x-ratelimit-reset-requests": "120ms"})
    assert openai["tokens"].reset == 2.0 and openai["requests"].reset == 0.12
    anthropic = stated_limits({"anthropic-ratelimit-tokens-limit": "80000",
                               "anthropic-ratelimit-tokens-remaining": "1000",
                               "anthropic-ratelimit-tokens-reset": "2099-01-01T00:00:00Z"})
    assert anthropic["tokens"].remaining == 1000 and anthropic["tokens"].reset > 0
    from teachers.ratelimit import request_tokens

    body = {"messages": states(1)[0].messages, "tools": [BASH], "max_tokens": 100}
    ours = request_tokens(body["messages"], body["tools"], {"max_tokens": 100})
    assert abs(ours - counted_tokens(body)) < 20
