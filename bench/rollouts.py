"""Rollouts per minute: `collect.run --ray` on 1 against 3 local worker nodes, beside `--workers 1|3`.

    python bench/rollouts.py [--instances 6] [--repeats 3] [--sleep 4]

A toy SWE-bench image (tests/collect_toy.py), a scripted student behind tests/vllm_server.py on
127.0.0.1; each rollout waits `--sleep` s in its container (a test run, say), then fixes the bug in three
more turns. Ray nodes come from ray.cluster_utils.Cluster on 127.0.0.1 (a head with no CPU, N workers
with 1 CPU and 1 `docker` each), started before the timer: the figure is the driver's wall time, from
its start (connect, probe, sweep) to its report. Prints the median of the repeats and the ratios, with
`uptime` beside them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collect.cluster import loopback_only  # noqa: E402
from tests.collect_toy import (  # noqa: E402
    FIX,
    NAMESPACE,
    VLLM_SCRIPTS,
    ensure_instance_images,
    toy_instance,
    toy_policy,
)
from tests.vllm_server import VLLMServer  # noqa: E402

NODE = {"num_cpus": 1, "resources": {"docker": 1}, "object_store_memory": 80 * 1024 * 1024}


def one_run(rows: list[dict], url: str, tag: str, tmp: Path, extra: list[str]) -> float:
    instances = tmp / "instances.jsonl"
    instances.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = Path(tempfile.mkdtemp(dir=tmp))
    argv = [sys.executable, "-m", "collect.run", "--instances", str(instances), "--student-url", url,
            "--student-model", "student", "--out", str(out), "--namespace", NAMESPACE, "--image-tag", tag,
            "-q", *extra]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    report = json.loads((out / "report.json").read_text())
    if done.returncode or report["ok"] != len(rows):
        raise SystemExit(f"run {extra} failed: {done.stderr.strip().splitlines()[-1:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sleep", type=int, default=4)
    args = parser.parse_args()
    import docker

    client = docker.from_env()
    ids = [f"toy__calc-{n}" for n in range(21, 21 + args.instances)]
    tag = ensure_instance_images(client, ids)
    steady = [[{"name": "bash", "arguments": {"command": f"sleep {args.sleep}; echo steady"}}], *FIX]
    rows = [toy_instance(instance_id, "steady") for instance_id in ids]
    loopback_only()
    from ray.cluster_utils import Cluster

    times: dict[str, list[float]] = {}
    with VLLMServer(toy_policy(scripts={**VLLM_SCRIPTS, "steady": steady})) as server, \
            tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        for workers in (1, 3):
            for _ in range(args.repeats):
                times.setdefault(f"--workers {workers}", []).append(
                    one_run(rows, server.url, tag, tmp, ["--workers", str(workers)]))
        for nodes in (1, 3):
            cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 * 1024 * 1024})
            try:
                for _ in range(nodes):
                    cluster.add_node(**NODE)
                cluster.wait_for_nodes()
                for _ in range(args.repeats):
                    times.setdefault(f"--ray, {nodes} node(s)", []).append(
                        one_run(rows, server.url, tag, tmp, ["--ray", cluster.address]))
            finally:
                cluster.shutdown()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"{args.instances} rollouts per run, {args.repeats} repeats, median; load: {load}")
    rate = {}
    for name, values in times.items():
        median = statistics.median(values)
        rate[name] = 60 * args.instances / median
        each = ", ".join(f"{value:.1f}" for value in values)
        print(f"  {name:22} {median:6.1f} s  {rate[name]:5.1f} rollouts/min  ({each})")
    print(f"  ratio 3/1 nodes (--ray):   {rate['--ray, 3 node(s)'] / rate['--ray, 1 node(s)']:.2f}")
    print(f"  ratio 3/1 --workers:       {rate['--workers 3'] / rate['--workers 1']:.2f}")
    print(f"  --ray 3 nodes / --workers 3: {rate['--ray, 3 node(s)'] / rate['--workers 3']:.2f}")


if __name__ == "__main__":
    main()
