"""Where Claude Code's recording proxy runs on Ray: per task, or once per node. What each costs.

    python bench/claude_code_proxy.py [--repeats 20]

Per task (what collect.run --ray does): each rollout task starts its own AnthropicProxy on its node's
docker network of the run, and closes it after. Two ways to get that network are timed:
  own      a network per task: create + inspect, then remove;
  shared   one network per node and run: looked up under a lock (created by the first task only).
Per node: one Ray actor per node holds the proxy (and the network); a task asks it for a route and gives
it back, two actor calls, and the proxy's records stay in the actor's process.
Also timed: importing the proxy in a fresh process (litellm's adapter), paid once per Ray worker
process (per task) or once per node (an actor), and how many bridge networks this engine holds at once
(its default address pools), the cap on rollouts per node with a network per task.
Prints medians in ms, with `uptime` beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from collect.claude_code import proxy_network  # noqa: E402
from collect.proxy import AnthropicProxy, ProxyConfig  # noqa: E402

LABELS = {"teacher-replay.collect": "bench-proxy"}
CONFIG = ProxyConfig(backend_url="http://127.0.0.1:9/v1", default_backend="m", main_models=["x"])


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f} ms"


def per_task(client: object, repeats: int, shared: bool) -> list[float]:
    times = []
    for n in range(repeats):
        started = time.monotonic()
        network = proxy_network(client, "bench-proxy-node" if shared else f"bench-proxy-{n}", LABELS, shared)
        gateway = network.attrs["IPAM"]["Config"][0]["Gateway"]
        proxy = AnthropicProxy(CONFIG, host=gateway).start()
        proxy.route("k", Path(os.devnull))
        proxy.unroute("k")
        proxy.close()
        if not shared:
            network.remove()
        times.append(time.monotonic() - started)
    return times


def per_node(repeats: int) -> tuple[float, list[float]]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)

    @ray.remote(num_cpus=0)
    class NodeProxy:
        def __init__(self) -> None:
            import docker

            self.network = proxy_network(docker.from_env(), "bench-proxy-actor", LABELS, shared=True)
            gateway = self.network.attrs["IPAM"]["Config"][0]["Gateway"]
            self.proxy = AnthropicProxy(CONFIG, host=gateway).start()

        def route(self, key: str) -> str:
            return self.proxy.route(key, Path(os.devnull))

        def unroute(self, key: str) -> None:
            self.proxy.unroute(key)

        def close(self) -> None:
            self.proxy.close()
            self.network.remove()

    started = time.monotonic()
    actor = NodeProxy.remote()
    ray.get(actor.route.remote("warm"))
    startup = time.monotonic() - started
    times = []
    for n in range(repeats):
        started = time.monotonic()
        ray.get(actor.route.remote(f"k{n}"))
        ray.get(actor.unroute.remote(f"k{n}"))
        times.append(time.monotonic() - started)
    ray.get(actor.close.remote())
    ray.shutdown()
    return startup, times


def cold_import() -> float:
    code = "import collect.proxy as p, collect.proxy_translate as t; t.warm_up()"
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    return time.monotonic() - started


def network_cap(client: object) -> int:
    made = []
    try:
        for n in range(200):
            made.append(client.networks.create(f"bench-proxy-cap-{n}", driver="bridge", internal=True,
                                               labels=LABELS))
    except Exception:  # noqa: BLE001 - the engine ran out of address pools: that is the figure
        pass
    finally:
        for network in made:
            network.remove()
    return len(made)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    import docker

    client = docker.from_env()
    AnthropicProxy(CONFIG).start().close()            # litellm imported before the timers
    own = per_task(client, args.repeats, shared=False)
    shared = per_task(client, args.repeats, shared=True)
    client.networks.get("bench-proxy-node").remove()
    startup, calls = per_node(args.repeats)
    cold = [cold_import() for _ in range(3)]
    print(f"per task, a network per task:      {ms(own)} per rollout")
    print(f"per task, the node's network:      {ms(shared)} per rollout")
    print(f"per node (actor), route + unroute: {ms(calls)} per rollout; {startup * 1000:8.1f} ms per node "
          "to start the actor")
    print(f"importing the proxy (litellm):     {ms(cold)} per fresh process")
    print(f"bridge networks this engine holds at once: {network_cap(client)}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
