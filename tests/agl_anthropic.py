"""A rollout that speaks the Anthropic Messages API through agent-lightning 0.3.0's LLMProxy, as the seed
example's Claude Code does (`POST {endpoint}/v1/messages`), between rollouts of the project's own
OpenAI-API agent (issue #55): the same tools, the same toy student behind the proxy.

LiteLLM turns the Anthropic request into an OpenAI one for the vLLM-shaped stand-in, and the proxy's
`raw_gen_ai_request` span records that translation: the tools as `{"type": "function", "function":
{"name", "parameters", "description"}}`, where the OpenAI agent sends `name, description, parameters`.
Equal by Python's `==`, other bytes: what tests/test_worker_bytes.py and test_agl_anthropic.py check.

`python -m tests.agl_anthropic` writes tests/data/agent_lightning/anthropic/ again (needs the 0.3.0
venv of tests/agl_venvs.py; nothing leaves 127.0.0.1).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import httpx

from collect.config import load_agent_spec
from collect.tools import execute
from tests.agl_rollouts import CALC, MODEL, ROLLOUTS, Made, _ask, _driver, _read, run_toy_agent, stand_in
from tests.collect_toy import toy_instance

DATA = Path(__file__).resolve().parent / "data" / "agent_lightning" / "anthropic"
# instance id -> (script, reward, API): the Anthropic one sorts between the OpenAI ones by file name.
MIXED = {"toy__calc-1": (*ROLLOUTS["toy__calc-1"], "openai"), "toy__calc-1a": ("fix", 1.0, "anthropic"),
         "toy__calc-2": (*ROLLOUTS["toy__calc-2"], "openai")}
MAX_TURNS = 10


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agent's OpenAI tools as the Messages API takes them (`input_schema` for `parameters`).

    >>> anthropic_tools([{"function": {"name": "a", "description": "d", "parameters": {}}}])
    [{'name': 'a', 'description': 'd', 'input_schema': {}}]
    """
    return [{"name": t["function"]["name"], "description": t["function"]["description"],
             "input_schema": t["function"]["parameters"]} for t in tools]


def run_anthropic_agent(endpoint: str, key: str, instance_id: str, script: str) -> int:
    """The toy instance worked through `/v1/messages`; the tools run on the in-memory workspace of
    tests/test_collect.py. Returns the number of calls."""
    from tests.test_collect import FakeWorkspace

    spec = load_agent_spec()
    system, first = spec.first_messages(toy_instance(instance_id, script)["problem_statement"])
    messages: list[dict[str, Any]] = [{"role": "user", "content": first["content"]}]
    workspace = FakeWorkspace({"calc.py": CALC})
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    with httpx.Client(timeout=300) as client:
        for turn in range(MAX_TURNS):
            body = {"model": MODEL, "max_tokens": 512, "system": system["content"],
                    "messages": messages, "tools": anthropic_tools(spec.tools)}
            reply = client.post(f"{endpoint}/v1/messages", json=body, headers=headers)
            reply.raise_for_status()
            content = reply.json()["content"]
            messages.append({"role": "assistant", "content": content})
            uses = [block for block in content if block.get("type") == "tool_use"]
            if not uses:
                return turn + 1
            results = []
            for use in uses:
                function = {"name": use["name"], "arguments": json.dumps(use["input"])}
                observation = execute(workspace, {"id": use["id"], "function": function})
                results.append({"type": "tool_result", "tool_use_id": use["id"],
                                "content": observation.output})
            messages.append({"role": "user", "content": results})
    return MAX_TURNS



def mixed_streams(python: Path, folder: Path) -> Made:
    """The seed example's span streams of MIXED's rollouts, in `folder` (as tests/agl_rollouts.py's
    seed_streams, one rollout on the Anthropic API)."""
    made = Made()
    work = folder.parent / f"{folder.name}-agent"
    work.mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    with stand_in(made) as server, _driver(python, server.url, work / "driver.log") as driver:
        _read(driver)
        for instance_id, (script, reward, api) in MIXED.items():
            before = len(made.requests) + made.refused
            rollout = _ask(driver, {"op": "start", "input": {"instance_id": instance_id}})
            made.rollout_ids[instance_id] = rollout["rollout_id"]
            if api == "anthropic":
                run_anthropic_agent(rollout["endpoint"], rollout["key"], instance_id, script)
            else:
                run_toy_agent(rollout["endpoint"], rollout["key"], instance_id, script, work)
            _ask(driver, {"op": "finish", "rollout_id": rollout["rollout_id"],
                          "attempt_id": rollout["attempt_id"], "reward": reward,
                          "calls": len(made.requests) + made.refused - before,
                          "path": str(folder / f"stream_{instance_id}.json")})
    return made


def make(data: Path = DATA) -> None:
    from tests.agl_venvs import python_of

    with tempfile.TemporaryDirectory() as work:
        mixed_streams(python_of("0.3.0"), Path(work) / "streams")
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        for stream in sorted((Path(work) / "streams").glob("stream_*.json")):
            shutil.copy(stream, data / stream.name)


if __name__ == "__main__":
    make()
    print(DATA)
