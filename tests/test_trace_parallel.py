"""`--trace-parallel` (#28): a long trace's states in waves against a prefix-caching loopback provider:
at most K in flight, each wave reading the one before from the provider's cache, billed within 1.3x of
one state at a time. Counts and usage, never times (bench/trace_parallel.py times it)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from replay.run import main
from tests.caching_server import PromptCache, caching_responder
from tests.llm_server import LLMServer, Reply
from tests.long_session import write_long_session
from tests.teacher_script import scripted
from tests.test_cost_run import billed


def run(source: Path, out: Path, k: str) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    lock, flight = threading.Lock(), {"now": 0, "most": 0}

    def answer(body: dict[str, Any]) -> Reply:
        reply = scripted(body)
        reply.delay = 0.15  # the calls a wave sends together overlap, and miss each other's prefixes
        return reply

    cache = PromptCache("openai")
    respond = caching_responder(cache, answer)

    def counted(body: dict[str, Any]) -> Reply:
        with lock:
            flight["now"] += 1
            flight["most"] = max(flight["most"], flight["now"])
        try:
            return respond(body)
        finally:
            with lock:
                flight["now"] -= 1

    with LLMServer(counted) as server:
        code = main(["--source", str(source), "--out", str(out), "--cache", str(out.parent / f"{k}.sqlite"),
                     "--teachers", f"gpt-5=openai/gpt-5@{server.url}#price=gpt-5", "--trace-parallel", k])
    assert code == 0
    return json.loads((out / "report.json").read_text()), cache.ledger, flight["most"]


@pytest.mark.parametrize("k", ["4", "auto"])
def test_waves_keep_the_prompt_cache_and_the_bill(tmp_path: Path, k: str) -> None:
    source = write_long_session(tmp_path / "src", 40, 1_000, preamble_chars=80_000)
    one, one_ledger, one_most = run(source, tmp_path / "k1", "1")
    many, ledger, most = run(source, tmp_path / f"k{k}", k)
    assert one["states"] == many["states"] == 40 and many["states_failed"] == 0
    assert one_most == 1 and 2 <= most <= (4 if k == "4" else 8)
    assert many["extra"]["prompt_cache"]["hit_share"] > 0.6
    cost, cost_one = sum(map(billed, ledger)), sum(map(billed, one_ledger))
    assert cost_one < cost <= 1.3 * cost_one, (cost, cost_one)  # waves pay for what they do not share
    if k == "auto":
        assert cost <= 1.1 * cost_one + 0.001  # the stated margin (prompt side), completions aside


def test_trace_parallel_flag_takes_auto_or_a_count(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--source", str(tmp_path), "--out", str(tmp_path / "o"), "--teachers", "gpt-5",
              "--trace-parallel", "0"])
    assert "--trace-parallel" in capsys.readouterr().err
