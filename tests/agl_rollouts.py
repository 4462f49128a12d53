"""Real agent-lightning rollouts for the tests: the project's own collect/ agent (tests/test_collect.py's
in-memory workspace) works toy instances through agent-lightning's proxy, in front of the vLLM-shaped
stand-in (tests/vllm_server.py); agent-lightning itself runs from its own venv (tests/agl_venvs.py).

- `seed_streams`: 0.3.0's store + LLMProxy (tests/agl_seed_driver.py); each rollout's spans written as
  the seed example writes them, `stream_<instance_id>.json`.
- `gateway_rollouts`: 1.0.2's real Gateway (`agl-server`), the stand-in registered as its model endpoint,
  rollouts created and finished through its API, rewards and a custom event posted to it.

Three rollouts each: `fix` (4 calls, reward 1), `nofix` (3 calls, reward 0), and `fails`, whose second
call the stand-in refuses with vLLM's context-length 400 (the agent ends the rollout there; reward 0).
Every chat request the stand-in answered is kept (`Made.requests`): its token ids are recomputed from it.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from collect.agent import run_agent
from collect.config import CollectConfig, load_agent_spec
from collect.records import RolloutWriter
from collect.student import Student
from tests.collect_toy import FIX, VLLM_SCRIPTS, toy_instance, toy_policy
from tests.vllm_server import VLLMConfig, VLLMServer, complete, error

HERE = Path(__file__).resolve().parent
MODEL = "Qwen/Qwen3-toy-student"
ROLLOUTS = {"toy__calc-1": ("fix", 1.0), "toy__calc-2": ("nofix", 0.0), "toy__calc-3": ("fails", 0.0)}
CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"


@dataclass
class Made:
    requests: list[dict[str, Any]] = field(default_factory=list)   # chat requests the stand-in answered
    refused: int = 0                                                  # calls it refused (HTTP 400)
    rollout_ids: dict[str, str] = field(default_factory=dict)         # instance id -> rollout id


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stand_in(made: Made) -> VLLMServer:
    """The vLLM-shaped student; the `fails` rollout's second call gets vLLM's context-length 400."""
    def intercept(request: dict[str, Any]) -> Any:
        if "messages" not in request:
            return None
        messages = request["messages"]
        if "[script: fails]" in json.dumps(messages[:2]) and any(m.get("role") == "tool" for m in messages):
            made.refused += 1
            return error("This model's maximum context length is 600 tokens. However, your prompt contains "
                         "900 input tokens, which exceeds this limit even without any output tokens.",
                         param="input_tokens")
        made.requests.append(request)
        return None

    return VLLMServer(toy_policy(scripts={**VLLM_SCRIPTS, "fails": FIX}), VLLMConfig(model=MODEL),
                      intercept=intercept)


def expected_body(request: dict[str, Any]) -> dict[str, Any]:
    """What the stand-in answered `request` (its token ids and logprobs are a function of the request)."""
    server = stand_in(Made())
    return complete(server.config, server.policy, request).body


def run_toy_agent(url: str, key: str, instance_id: str, script: str, out: Path) -> None:
    """The collect/ agent on one toy instance, its student at `url` (a proxy of agent-lightning)."""
    from tests.test_collect import FakeWorkspace

    config = CollectConfig(instances=out / "instances.jsonl", student_url=url, student_model=MODEL,
                           out=out, api_key=key, request_timeout=300)
    problem = toy_instance(instance_id, script)["problem_statement"]
    with RolloutWriter(out / f"{instance_id}.rollout.jsonl") as writer:
        run_agent(Student(config), FakeWorkspace({"calc.py": CALC}), load_agent_spec(), problem, writer, 10,
                  threading.Event())


@contextmanager
def _driver(python: Path, url: str, log: Path) -> Iterator[subprocess.Popen[str]]:
    args = [str(python), str(HERE / "agl_seed_driver.py"), url, MODEL, str(free_port()), str(free_port())]
    with open(log, "w") as errors:   # litellm's and uvicorn's chatter, for a failing test to show
        driver = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                  text=True)
    try:
        yield driver
    finally:
        if driver.poll() is None:
            driver.stdin.write('{"op": "quit"}\n')      # type: ignore[union-attr]
            driver.stdin.flush()                         # type: ignore[union-attr]
            try:
                driver.wait(timeout=60)
            except subprocess.TimeoutExpired:
                driver.kill()
                driver.wait()


def _ask(driver: subprocess.Popen[str], command: dict[str, Any]) -> dict[str, Any]:
    driver.stdin.write(json.dumps(command) + "\n")   # type: ignore[union-attr]
    driver.stdin.flush()                              # type: ignore[union-attr]
    return _read(driver)


def _read(driver: subprocess.Popen[str]) -> dict[str, Any]:
    while line := driver.stdout.readline():           # type: ignore[union-attr]
        if line.startswith("{"):                      # litellm prints its banner on stdout first
            return json.loads(line)
    raise RuntimeError(f"agent-lightning 0.3.0's driver exited ({driver.wait()})")


def seed_streams(python: Path, folder: Path) -> Made:
    """The seed example's outputs for the three toy rollouts, in `folder`."""
    made = Made()
    work = folder.parent / f"{folder.name}-agent"
    work.mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    with stand_in(made) as server, _driver(python, server.url, work / 'driver.log') as driver:
        _read(driver)
        for instance_id, (script, reward) in ROLLOUTS.items():
            before = len(made.requests) + made.refused
            rollout = _ask(driver, {"op": "start", "input": {"instance_id": instance_id}})
            made.rollout_ids[instance_id] = rollout["rollout_id"]
            run_toy_agent(rollout["endpoint"], rollout["key"], instance_id, script, work)
            _ask(driver, {"op": "finish", "rollout_id": rollout["rollout_id"],
                          "attempt_id": rollout["attempt_id"], "reward": reward,
                          "calls": len(made.requests) + made.refused - before,
                          "path": str(folder / f"stream_{instance_id}.json")})
    return made


# --- agent-lightning 1.0.2's Gateway -----------------------------------------------------------------

@contextmanager
def gateway(python: Path) -> Iterator[str]:
    """The real Gateway on 127.0.0.1 (`agl-server host=… port=…`, Hydra overrides); yields its URL."""
    port = free_port()
    # Hydra writes outputs/<date>/<time>/ under the working directory: a folder of its own, not the checkout.
    workdir = tempfile.mkdtemp(prefix="agl-server-")
    server = subprocess.Popen([str(python.parent / "agl-server"), "host=127.0.0.1", f"port={port}",
                               f"default_proxy.model_name={MODEL}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                if server.poll() is not None:
                    raise RuntimeError(f"agl-server exited ({server.returncode})") from None
            time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def gateway_rollouts(url: str, work: Path) -> Made:
    """The three toy rollouts through the Gateway: created, run (state `running`, then `succeeded`),
    each with its reward event and one custom event (`fix` has an earlier attempt with one event, `nofix`
    also makes a /completions call); a fourth rollout has no call at all."""
    made = Made()
    work.mkdir(parents=True, exist_ok=True)
    with stand_in(made) as server, httpx.Client(base_url=url, timeout=300) as api:
        api.post("/api/models", json=[{"model": MODEL, "endpoint": server.url}]).raise_for_status()
        for instance_id, (script, reward) in ROLLOUTS.items():
            rollout_id = f"ro-{instance_id}"
            made.rollout_ids[instance_id] = rollout_id
            api.post("/api/rollouts", json=[{"rollout_id": rollout_id, "input": {"instance_id": instance_id},
                                             "is_train": True}]).raise_for_status()
            _patch(api, rollout_id, "running", "0")
            if script == "fix":   # an earlier attempt that left an event: the events route serves attempt 0
                api.post(f"/api/rollouts/{rollout_id}/attempt/0-crashed/events",
                         json={"event_type": "runner_crash", "data": {"signal": 9}}).raise_for_status()
            proxy = f"{url}/proxy/rollout/{rollout_id}/attempt/0/mode/train/openai/v1"
            run_toy_agent(proxy, "EMPTY", instance_id, script, work)
            if script == "nofix":   # a text completion through the same proxy: no conversation to replay
                api.post(f"{proxy}/completions", json={"prompt": "def add(a, b):", "max_tokens": 8})
            events = f"/api/rollouts/{rollout_id}/attempt/0/events"
            api.post(events, json={"event_type": "swebench_eval", "data": {"resolved": reward == 1.0}})
            api.post(events, json={"event_type": "reward", "data": {"value": reward, "source": "agent"}})
            _patch(api, rollout_id, "succeeded", "0")
        api.post("/api/rollouts", json=[{"rollout_id": "ro-empty", "input": {"instance_id": "toy__none"}}])
        _patch(api, "ro-empty", "running", "0")
        _patch(api, "ro-empty", "failed", "0")
        made.rollout_ids["toy__none"] = "ro-empty"
    return made


def _patch(api: httpx.Client, rollout_id: str, state: str, attempt: str) -> None:
    api.patch(f"/api/rollouts/{rollout_id}",
              json={"status": {"state": state, "last_attempt_id": attempt}}).raise_for_status()
