"""Issue #55: agent-lightning sources (0.3.0's span streams, 1.0.2's Gateway export) where one rollout
spoke the Anthropic Messages API between OpenAI ones (tests/agl_anthropic.py; LiteLLM hands the Anthropic
rollout's tools on as `name, parameters, description`, the OpenAI agent sends `name, description,
parameters`). Every state's `tools` are byte for byte (json.dumps) the tools of the request it came from,
with one ingestion process and with two.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ingestion.agent_lightning.export import write_export
from ingestion.store import load_states
from replay.run import main
from tests.agl_anthropic import DATA, GATEWAY_EXPORT, MIXED, mixed_gateway, mixed_streams
from tests.agl_rollouts import gateway
from tests.agl_venvs import Unavailable, python_of


def requested_tools(folder: Path) -> dict[tuple[str, Any], list[dict[str, Any]]]:
    """The tools of every answered request, read here from the sources themselves: a stream's
    raw_gen_ai_request spans (litellm writes them as Python reprs), by (rollout id, sequence id); the
    export's model_request events, by response id."""
    tools: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for stream in sorted(folder.glob("stream_*.json")):
        for line in stream.read_text().splitlines():
            span = json.loads(line)
            if span["name"] == "raw_gen_ai_request":
                value = span["attributes"].get("llm.hosted_vllm.tools")
                tools[span["rollout_id"], span["sequence_id"]] = ast.literal_eval(value) if value else []
    for line in (folder / GATEWAY_EXPORT).read_text().splitlines():
        record = json.loads(line)
        for event in record.get("events") or []:
            if event["event_type"] == "model_request":
                tools["response", event["data"]["response"]["id"]] = event["data"]["request"].get("tools", [])
    return tools


def request_of(state: Any) -> tuple[str, Any]:
    if state.source == "agl_spans":
        return state.metadata["rollout_id"], state.metadata["sequence_id"]
    return "response", state.metadata["response_id"]


def dry_run(source: Path, out: Path, workers: int) -> list[Any]:
    assert main(["--source", str(source), "--out", str(out), "--dry-run",
                 "--ingest-workers", str(workers)]) == 0
    return list(load_states(out))


def check(source: Path, tmp_path: Path) -> None:
    asked = requested_tools(source)
    orders = {json.dumps(tools) for tools in asked.values()}
    assert len(orders) == 2   # the Anthropic rollout's key order and the OpenAI rollouts'
    for kind in ("streams", "export"):   # in each source alone, not only across the two
        assert len({json.dumps(tools) for key, tools in asked.items()
                    if (key[0] == "response") == (kind == "export")}) == 2, kind
    first, second = (json.loads(order) for order in orders)
    assert first == second    # equal by ==: what the redaction pass took for the same list
    outputs = []
    for workers in (1, 2):
        states = dry_run(source, tmp_path / f"w{workers}", workers)
        assert len(states) == len(asked) == 22   # each source: calc-1 4 calls, calc-1a 4, calc-2 3
        assert {state.source for state in states} == {"agl_spans", "agl_gateway"}
        for state in states:
            assert json.dumps(state.tools) == json.dumps(asked[request_of(state)]), state.state_id
        outputs.append([(tmp_path / f"w{workers}" / name).read_bytes() for name in ("states.jsonl",
                                                                                      "traces.jsonl")])
    assert outputs[0] == outputs[1]


def test_the_fixtures_states_carry_their_own_requests_tools(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(DATA, source)
    check(source, tmp_path)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    try:
        seed, gateway_python = python_of("0.3.0"), python_of("1.0.2")
    except Unavailable as why:
        pytest.skip(f"agentlightning cannot be installed here: {why}")
    folder = tmp_path_factory.mktemp("anthropic") / "sources"
    made = mixed_streams(seed, folder)
    with gateway(gateway_python) as url:
        through_gateway = mixed_gateway(url, folder.parent / "gateway-agent")
        write_export(url, folder / GATEWAY_EXPORT)
    return folder, made.requests + through_gateway.requests


def test_fresh_sources_from_the_real_servers(fresh: tuple[Path, list[dict[str, Any]]],
                                             tmp_path: Path) -> None:
    # agent-lightning records the tools that were sent to the model: the very lists the stand-in
    # received, in their order, for each API
    folder, requests = fresh
    assert sorted(p.name for p in folder.glob("stream_*.json")) == [f"stream_{i}.json" for i in MIXED]
    received = [json.dumps(request["tools"]) for request in requests]
    assert sorted(received) == sorted(json.dumps(tools) for tools in requested_tools(folder).values())
    functions = [json.loads(tools)[0]["function"] for tools in received]
    assert {tuple(function) for function in functions} == {("name", "description", "parameters"),
                                                            ("name", "parameters", "description")}
    check(folder, tmp_path)
