"""agent-lightning 0.3.0's store and LLM proxy, as the seed example (`examples/claude_code`, tag v0.3.0)
sets them up; run by the 0.3.0 venv's interpreter (tests/agl_venvs.py), driven over stdin / stdout in
JSON lines by tests/test_agl_seed.py, whose agent talks to the proxy.

    python agl_seed_driver.py VLLM_URL MODEL STORE_PORT PROXY_PORT

`{"op": "start", "input": {...}}` starts a rollout in the store and answers its id, attempt and proxy
endpoint; `{"op": "finish", "rollout_id", "attempt_id", "reward", "path"}` emits the reward, marks the
attempt succeeded and writes the rollout's spans to `path` as the seed example does
(`json.dumps(span.model_dump())`, one a line, from `store.query_spans`); `{"op": "quit"}` stops.

What it takes to run on today's packages, found by running it: litellm's proxy wants a master key (the
agent sends it), the store must be thread-safe (the proxy's exporter and this loop both reach it), both
servers advertise 127.0.0.1 (by default they advertise the machine's outbound address), the proxy's
health check is off (it probes the model), litellm reads its local price map, and the reward is emitted
from a process of its own: an OtelTracer in the store's process deadlocks its export.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

# agentlightning is imported inside the functions: this file is collected (for doctests) by the suite's
# own venv, which does not have it.
ENVIRONMENT = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MASTER_KEY": "sk-agl-seed-test",
               "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "120"}   # seconds; a loaded CI machine is slow


def loopback(port: int, mode: str, health: str | None) -> Any:
    from agentlightning.utils.server_launcher import PythonServerLauncherArgs

    return PythonServerLauncherArgs(host="127.0.0.1", access_host="127.0.0.1", port=port, launch_mode=mode,
                                    healthcheck_url=health)


async def serve(vllm_url: str, model: str, store_port: int, proxy_port: int) -> None:
    from agentlightning import InMemoryLightningStore, LightningStoreServer
    from agentlightning.llm_proxy import LLMProxy

    store = LightningStoreServer(InMemoryLightningStore(thread_safe=True),
                                 launcher_args=loopback(store_port, "thread", "/v1/agl/health"))
    await store.start()
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = store.otlp_traces_endpoint()
    proxy = LLMProxy(store=store, callbacks=["return_token_ids", "opentelemetry", "logprobs"],
                     launcher_args=loopback(proxy_port, "mp", None))
    proxy.update_model_list([{"model_name": model,
                              "litellm_params": {"model": f"hosted_vllm/{model}", "api_base": vllm_url}}])
    await proxy.start()
    answer({"ready": True})
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command = json.loads(line)
        if command["op"] == "start":
            rollout = await store.start_rollout(input=command["input"])
            llm = proxy.as_resource(rollout.rollout_id, rollout.attempt.attempt_id)
            answer({"rollout_id": rollout.rollout_id, "attempt_id": rollout.attempt.attempt_id,
                    "endpoint": llm.endpoint, "key": os.environ["LITELLM_MASTER_KEY"]})
        elif command["op"] == "finish":
            rollout_id, attempt_id = command["rollout_id"], command["attempt_id"]
            reward = await asyncio.create_subprocess_exec(sys.executable, __file__, "reward", store.endpoint,
                                                          rollout_id, attempt_id, str(command["reward"]))
            await reward.wait()
            await store.update_attempt(rollout_id, attempt_id, status="succeeded")
            spans = await settled_spans(store, rollout_id, command["calls"])
            with open(command["path"], "w") as out:
                for span in spans:
                    out.write(json.dumps(span.model_dump()) + "\n")
            answer({"spans": len(spans)})
        else:
            break
    await proxy.stop()


async def settled_spans(store: Any, rollout_id: str, calls: int) -> list[Any]:
    """The rollout's spans once the proxy has exported every call's subtree (it exports after answering)
    and the reward is in."""
    for _ in range(600):
        spans = await store.query_spans(rollout_id)
        sequences = {span.sequence_id for span in spans if span.name == "Received Proxy Server Request"}
        if len(sequences) >= calls and any(span.name == "agentlightning.annotation" for span in spans):
            return spans
        await asyncio.sleep(0.2)
    return spans


async def emit(store_url: str, rollout_id: str, attempt_id: str, value: float) -> None:
    from agentlightning import LightningStoreClient, OtelTracer, emit_message, emit_reward

    tracer = OtelTracer()
    tracer.init_worker(0, LightningStoreClient(store_url))
    async with tracer.trace_context("reward", rollout_id=rollout_id, attempt_id=attempt_id):
        emit_message("graded by the toy harness")   # a custom span: it passes through to the states
        emit_reward(value)


def answer(value: dict) -> None:
    print(json.dumps(value), flush=True)


if __name__ == "__main__":
    for key, value in ENVIRONMENT.items():
        os.environ.setdefault(key, value)
    if sys.argv[1] == "reward":
        asyncio.run(emit(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])))
    else:
        asyncio.run(serve(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
