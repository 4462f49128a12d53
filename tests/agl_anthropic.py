"""A rollout that speaks the Anthropic Messages API between rollouts of the project's own OpenAI-API agent
(issue #55): the same tools, the same toy student, through agent-lightning's real servers.

- 0.3.0's LLMProxy (the seed example's): the rollout posts to `{endpoint}/v1/messages`, as the seed
  example's Claude Code does; LiteLLM, the proxy, translates it for the vLLM-shaped stand-in and its
  `raw_gen_ai_request` span records the translation (`stream_<id>.json`);
- 1.0.2's Gateway proxies OpenAI routes only: the rollout's client is LiteLLM's Messages API, which
  translates the same way before the Gateway records it (`rollouts.agl.jsonl`, the export).

Either way the Anthropic rollout's tools are `{"type": "function", "function": {"name", "parameters",
"description"}}` where the OpenAI agent sends `name, description, parameters`: equal by Python's `==`,
other bytes (tests/test_agl_anthropic.py, tests/test_worker_bytes.py).

`python -m tests.agl_anthropic` writes tests/data/agent_lightning/anthropic/ again (needs both venvs of
tests/agl_venvs.py; nothing leaves 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from collect.config import load_agent_spec
from collect.tools import execute
from tests import agl_rollouts
from tests.agl_rollouts import CALC, MODEL, ROLLOUTS, Made, run_toy_agent, stand_in
from tests.collect_toy import toy_instance

DATA = Path(__file__).resolve().parent / "data" / "agent_lightning" / "anthropic"
# instance id -> (script, reward, API): the Anthropic one sorts between the OpenAI ones by file name.
MIXED = {"toy__calc-1": (*ROLLOUTS["toy__calc-1"], "openai"), "toy__calc-1a": ("fix", 1.0, "anthropic"),
         "toy__calc-2": (*ROLLOUTS["toy__calc-2"], "openai")}
MAX_TURNS = 10
GATEWAY_EXPORT = "rollouts.agl.jsonl"


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agent's OpenAI tools as the Messages API takes them (`input_schema` for `parameters`).

    >>> anthropic_tools([{"function": {"name": "a", "description": "d", "parameters": {}}}])
    [{'name': 'a', 'description': 'd', 'input_schema': {}}]
    """
    return [{"name": t["function"]["name"], "description": t["function"]["description"],
             "input_schema": t["function"]["parameters"]} for t in tools]


Send = Callable[[dict[str, Any]], list[dict[str, Any]]]   # a Messages API body -> the reply's content


def over_http(endpoint: str, key: str) -> Send:
    """`POST {endpoint}/v1/messages`, as Claude Code asks agent-lightning 0.3.0's LLMProxy (a LiteLLM
    proxy, which speaks the Messages API itself)."""
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}

    def send(body: dict[str, Any]) -> list[dict[str, Any]]:
        reply = httpx.post(f"{endpoint}/v1/messages", json=body, headers=headers, timeout=300)
        reply.raise_for_status()
        return reply.json()["content"]
    return send


def through_litellm(base: str) -> Send:
    """LiteLLM's Messages API client (`litellm.anthropic_messages`) with an OpenAI-API server behind it:
    1.0.2's Gateway proxies `/openai/v1` routes only, so an Anthropic-API agent reaches it through
    LiteLLM's translation, as through a LiteLLM proxy."""
    import litellm

    def send(body: dict[str, Any]) -> list[dict[str, Any]]:
        reply = asyncio.run(litellm.anthropic_messages(**{**body, "model": f"hosted_vllm/{MODEL}"},
                                                       api_base=base, api_key="EMPTY", num_retries=0))
        return reply["content"]
    return send


def run_anthropic_agent(send: Send, instance_id: str, script: str) -> int:
    """The toy instance worked through the Messages API; the tools run on the in-memory workspace of
    tests/test_collect.py. Returns the number of calls."""
    from tests.test_collect import FakeWorkspace

    spec = load_agent_spec()
    system, first = spec.first_messages(toy_instance(instance_id, script)["problem_statement"])
    messages: list[dict[str, Any]] = [{"role": "user", "content": first["content"]}]
    workspace = FakeWorkspace({"calc.py": CALC})
    for turn in range(MAX_TURNS):
        content = send({"model": MODEL, "max_tokens": 512, "system": system["content"], "messages": messages,
                        "tools": anthropic_tools(spec.tools)})
        messages.append({"role": "assistant", "content": content})
        uses = [block for block in content if block.get("type") == "tool_use"]
        if not uses:
            return turn + 1
        results = []
        for use in uses:
            function = {"name": use["name"], "arguments": json.dumps(use["input"])}
            observation = execute(workspace, {"id": use["id"], "function": function})
            results.append({"type": "tool_result", "tool_use_id": use["id"], "content": observation.output})
        messages.append({"role": "user", "content": results})
    return MAX_TURNS


def mixed_streams(python: Path, folder: Path) -> Made:
    """The seed example's span streams of MIXED's rollouts, in `folder` (as tests/agl_rollouts.py's
    seed_streams, one rollout on the Anthropic API)."""
    made = Made()
    work = folder.parent / f"{folder.name}-agent"
    work.mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    with stand_in(made) as server, agl_rollouts._driver(python, server.url, work / "driver.log") as driver:
        agl_rollouts._read(driver)
        for instance_id, (script, reward, api) in MIXED.items():
            before = len(made.requests) + made.refused
            rollout = agl_rollouts._ask(driver, {"op": "start", "input": {"instance_id": instance_id}})
            made.rollout_ids[instance_id] = rollout["rollout_id"]
            if api == "anthropic":
                run_anthropic_agent(over_http(rollout["endpoint"], rollout["key"]), instance_id, script)
            else:
                run_toy_agent(rollout["endpoint"], rollout["key"], instance_id, script, work)
            agl_rollouts._ask(driver, {"op": "finish", "rollout_id": rollout["rollout_id"],
                                       "attempt_id": rollout["attempt_id"], "reward": reward,
                                       "calls": len(made.requests) + made.refused - before,
                                       "path": str(folder / f"stream_{instance_id}.json")})
    return made


def mixed_gateway(url: str, work: Path) -> Made:
    """MIXED's rollouts through 1.0.2's Gateway at `url` (as tests/agl_rollouts.py's gateway_rollouts:
    created, running, a reward event, succeeded), the Anthropic one through LiteLLM's translation."""
    made = Made()
    work.mkdir(parents=True, exist_ok=True)
    with stand_in(made) as server, httpx.Client(base_url=url, timeout=300) as api:
        api.post("/api/models", json=[{"model": MODEL, "endpoint": server.url}]).raise_for_status()
        for instance_id, (script, reward, api_kind) in MIXED.items():
            rollout_id = made.rollout_ids[instance_id] = f"ro-{instance_id}"
            api.post("/api/rollouts", json=[{"rollout_id": rollout_id, "input": {"instance_id": instance_id},
                                             "is_train": True}]).raise_for_status()
            agl_rollouts._patch(api, rollout_id, "running", "0")
            proxy = f"{url}/proxy/rollout/{rollout_id}/attempt/0/mode/train/openai/v1"
            if api_kind == "anthropic":
                run_anthropic_agent(through_litellm(proxy), instance_id, script)
            else:
                run_toy_agent(proxy, "EMPTY", instance_id, script, work)
            api.post(f"/api/rollouts/{rollout_id}/attempt/0/events",
                     json={"event_type": "reward", "data": {"value": reward, "source": "agent"}})
            agl_rollouts._patch(api, rollout_id, "succeeded", "0")
    return made


def make(data: Path = DATA) -> None:
    from ingestion.agent_lightning.export import write_export
    from tests.agl_venvs import python_of

    with tempfile.TemporaryDirectory() as work:
        mixed_streams(python_of("0.3.0"), Path(work) / "streams")
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        for stream in sorted((Path(work) / "streams").glob("stream_*.json")):
            shutil.copy(stream, data / stream.name)
        with agl_rollouts.gateway(python_of("1.0.2")) as url:
            mixed_gateway(url, Path(work) / "gateway")
            write_export(url, data / GATEWAY_EXPORT)


if __name__ == "__main__":
    make()
    print(DATA)
