"""Issue #55: agent-lightning span streams where one rollout spoke the Anthropic Messages API between
OpenAI ones (tests/agl_anthropic.py; LiteLLM hands the Anthropic rollout's tools on as `name, parameters,
description`, the OpenAI agent sends `name, description, parameters`). Every state's `tools` are byte for
byte (json.dumps) the tools of the request it came from, with one ingestion process and with two.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ingestion.store import load_states
from replay.run import main
from tests.agl_anthropic import DATA, MIXED, mixed_streams
from tests.agl_venvs import Unavailable, python_of


def requested_tools(folder: Path) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """(rollout id, sequence id) -> the tools of the request each raw_gen_ai_request span records, read
    here from the spans themselves (litellm writes them as Python reprs)."""
    tools = {}
    for stream in sorted(folder.glob("stream_*.json")):
        for line in stream.read_text().splitlines():
            span = json.loads(line)
            if span["name"] == "raw_gen_ai_request":
                value = span["attributes"].get("llm.hosted_vllm.tools")
                tools[span["rollout_id"], span["sequence_id"]] = ast.literal_eval(value) if value else []
    return tools


def dry_run(source: Path, out: Path, workers: int) -> list[Any]:
    assert main(["--source", str(source), "--out", str(out), "--dry-run",
                 "--ingest-workers", str(workers)]) == 0
    return list(load_states(out))


def check(source: Path, tmp_path: Path) -> None:
    asked = requested_tools(source)
    orders = {json.dumps(tools) for tools in asked.values()}
    assert len(orders) == 2   # the Anthropic rollout's key order and the OpenAI rollouts'
    first, second = (json.loads(order) for order in orders)
    assert first == second    # equal by ==: what the redaction pass took for the same list
    outputs = []
    for workers in (1, 2):
        states = dry_run(source, tmp_path / f"w{workers}", workers)
        assert len(states) == len(asked) == 11   # calc-1: 4 calls, calc-1a: 4, calc-2: 3
        for state in states:
            request = asked[state.metadata["rollout_id"], state.metadata["sequence_id"]]
            assert json.dumps(state.tools) == json.dumps(request), state.state_id
        outputs.append([(tmp_path / f"w{workers}" / name).read_bytes() for name in ("states.jsonl",
                                                                                      "traces.jsonl")])
    assert outputs[0] == outputs[1]


def test_the_fixtures_states_carry_their_own_requests_tools(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(DATA, source)
    check(source, tmp_path)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    try:
        python = python_of("0.3.0")
    except Unavailable as why:
        pytest.skip(f"agentlightning 0.3.0 cannot be installed here: {why}")
    folder = tmp_path_factory.mktemp("anthropic") / "streams"
    return folder, mixed_streams(python, folder)


def test_fresh_streams_from_the_real_proxy(fresh: tuple[Path, Any], tmp_path: Path) -> None:
    # agent-lightning 0.3.0's LLMProxy (LiteLLM) records the tools it sent the model: the very lists the
    # stand-in received, in its order, for each API
    folder, made = fresh
    assert sorted(p.name for p in folder.glob("stream_*.json")) == [f"stream_{i}.json" for i in MIXED]
    received = [json.dumps(request["tools"]) for request in made.requests]
    assert sorted(received) == sorted(json.dumps(tools) for tools in requested_tools(folder).values())
    functions = [json.loads(tools)[0]["function"] for tools in received]
    assert {tuple(function) for function in functions} == {("name", "description", "parameters"),
                                                            ("name", "parameters", "description")}
    check(folder, tmp_path)
