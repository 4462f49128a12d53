"""`collect.run --ray` against a real Ray cluster on this machine (`-m docker`).

ray.cluster_utils.Cluster starts a head that runs nothing (0 CPUs) and three worker nodes, each with one
CPU and one unit of the `docker` resource, all on 127.0.0.1 and all driving the local docker engine; a
scripted student behind tests/vllm_server.py plays the rollouts. The driver is the real CLI, in a child
process, as a user runs it against `ray start --head`.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from collect.instances import image_name
from collect.on_ray import LABEL_OUT, out_key
from collect.runtime import LABEL, containers
from tests.collect_toy import FIX, NAMESPACE, VLLM_SCRIPTS, ensure_instance_images, toy_instance, toy_policy
from tests.ray_cluster import NODE_ARGS, node_containers, ray_cluster
from tests.test_collect_docker import ROOT, command, leftovers, records
from tests.vllm_server import VLLMServer

pytestmark = pytest.mark.docker
IDS = [f"toy__calc-{n}" for n in range(11, 17)]
WORKERS = 3
# Each rollout waits a little in its container first, so a node can be lost while it holds one.
STEADY = [[{"name": "bash", "arguments": {"command": "sleep 4; echo steady"}}], *FIX]
SCRIPTS = {**VLLM_SCRIPTS, "steady": STEADY}
TIMING = {"created_at", "elapsed_s", "run_id", "rollout_id", "head"}


@pytest.fixture(scope="module")
def cluster() -> Any:
    yield from ray_cluster(WORKERS)


@pytest.fixture(scope="module")
def image_tag(client: Any) -> str:
    return ensure_instance_images(client, IDS)


def run_driver(tmp_path: Path, rows: list[Any], url: str, tag: str, out: str,
               *extra: str) -> subprocess.Popen:
    argv = command(tmp_path, rows, url, tag, *extra)
    argv[argv.index("--out") + 1] = str(tmp_path / out)
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen, out: Path) -> dict:
    _, stderr = process.communicate(timeout=400)
    assert process.returncode == 0, stderr
    return json.loads((out / "report.json").read_text())


def normalised(value: Any) -> Any:
    """A rollout record without what differs between two runs of the same rollout: times, ids, hashes."""
    if isinstance(value, dict):
        return {key: normalised(item) for key, item in value.items() if key not in TIMING}
    if isinstance(value, list):
        return [normalised(item) for item in value]
    if isinstance(value, str):
        return re.sub(r"chatcmpl-(tool-)?[0-9a-f]{16,32}", "chatcmpl-ID", value)
    return value


def first_difference(ours: Any, theirs: Any, path: str = "") -> str:
    """Where two records first differ, and both values there (pytest's own diff cuts a long one short)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs)):
            if ours.get(key) != theirs.get(key):
                return first_difference(ours.get(key), theirs.get(key), f"{path}.{key}")
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for n, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if a != b:
                return first_difference(a, b, f"{path}[{n}]")
    return f"at {path or 'the top'}: ray {ours!r:.600} / local {theirs!r:.600}"


def test_a_ray_run_survives_a_lost_node_and_equals_a_local_run(tmp_path: Path, client: Any, cluster: Any,
                                                                 image_tag: str) -> None:
    rows = [toy_instance(instance_id, "steady") for instance_id in IDS]
    with VLLMServer(toy_policy(scripts=SCRIPTS)) as server:
        driver = run_driver(tmp_path, rows, server.url, image_tag, "ray", "--ray", cluster.address,
                            "--evaluate")
        deadline, busy = time.monotonic() + 120, {}
        while len(set(busy.values())) < WORKERS and time.monotonic() < deadline and driver.poll() is None:
            busy = node_containers(client)
            time.sleep(0.2)
        assert len(set(busy.values())) == WORKERS, "every worker node holds a rollout"
        lost = next(node for node in cluster.worker_nodes
                    if node.node_id[:8] == next(iter(busy.values())).rsplit("/", 1)[1])
        cluster.remove_node(lost, allow_graceful=False)          # mid-rollout: its container is still up
        report = finish(driver, tmp_path / "ray")

        assert report["ray"]["nodes"] == WORKERS and report["ray"]["nodes_lost"] == 1
        assert sorted(o["instance_id"] for o in report["outcomes"]) == IDS       # each done once
        assert (report["rollouts"], report["ok"], report["resolved"], report["started"]) == (6, 6, 6, 6)
        lost_name = f"127.0.0.1/{lost.node_id[:8]}"
        assert sum(n["rollouts"] for n in report["nodes"].values()) == 6
        assert all(name.startswith("127.0.0.1/") for name in report["nodes"])   # loopback only
        assert report["nodes"].get(lost_name, {"rollouts": 0})["rollouts"] < 6
        assert leftovers(client) == []                           # the lost node's container too
        assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == sorted(
            [f"{i}.rollout.jsonl" for i in IDS] + ["report.json"])   # no temporary file left behind

        local = subprocess.run(command(tmp_path, rows, server.url, image_tag, "--workers", "2", "--evaluate"),
                               cwd=ROOT, capture_output=True, text=True, timeout=400)
        assert local.returncode == 0, local.stderr
        for instance_id in IDS:
            ours = records(tmp_path / "ray" / f"{instance_id}.rollout.jsonl")
            theirs = records(tmp_path / "out" / f"{instance_id}.rollout.jsonl")
            ours, theirs = normalised(ours), normalised(theirs)
            assert ours == theirs, first_difference(ours, theirs)

        written = {i: (tmp_path / "ray" / f"{i}.rollout.jsonl").read_bytes() for i in IDS}
        # what a node lost for good (or a killed driver) left: the next run on the same DIR removes it
        stale = client.containers.run(image_name(IDS[0], NAMESPACE, image_tag), ["tail", "-f", "/dev/null"],
                                      detach=True, network_mode="none",
                                      labels={LABEL: "collect-stale", LABEL_OUT: out_key(tmp_path / "ray")})
        again = finish(run_driver(tmp_path, rows, server.url, image_tag, "ray", "--ray", cluster.address,
                                  "--evaluate"), tmp_path / "ray")
    assert (again["started"], again["resumed"], again["rollouts"], again["resolved"]) == (0, 6, 6, 6)
    assert written == {i: (tmp_path / "ray" / f"{i}.rollout.jsonl").read_bytes() for i in IDS}
    assert stale.id not in {c.id for c in containers(client)}
    assert leftovers(client) == []
    cluster.add_node(**NODE_ARGS)                               # for the next test
    cluster.wait_for_nodes()


def test_sigint_on_the_driver_cancels_the_tasks_and_removes_their_containers(
        tmp_path: Path, client: Any, cluster: Any, image_tag: str) -> None:
    rows = [toy_instance(instance_id, "sleepy") for instance_id in IDS[:3]]
    with VLLMServer(toy_policy()) as server:
        driver = run_driver(tmp_path, rows, server.url, image_tag, "ray", "--ray", cluster.address)
        deadline = time.monotonic() + 120
        while len(node_containers(client)) < 3 and time.monotonic() < deadline and driver.poll() is None:
            time.sleep(0.2)
        assert len(node_containers(client)) == 3
        time.sleep(1.0)                                         # the agents are inside `sleep 300` now
        driver.send_signal(2)
        _, stderr = driver.communicate(timeout=120)
    assert driver.returncode == 130, stderr
    report = json.loads((tmp_path / "ray/report.json").read_text())
    assert report["interrupted"] is True and report["errors"] == {"interrupted": 3}
    assert leftovers(client) == [] and not containers(client, {"label": LABEL})


def test_a_student_only_the_driver_reaches_fails_at_once(tmp_path: Path, client: Any, cluster: Any,
                                                         image_tag: str) -> None:
    rows = [toy_instance(IDS[0], "fix")]
    argv = command(tmp_path, rows, "http://127.0.0.1:9/v1", image_tag, "--ray", cluster.address)
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180)
    lines = [line for line in done.stderr.splitlines() if line.startswith("collect.run")]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "cannot reach the student at http://127.0.0.1:9/v1" in lines[0] and "Ray node" in lines[0]
    assert not (tmp_path / "out").exists() and leftovers(client) == []


def test_each_sample_is_a_task_of_its_own_and_equals_a_local_run(tmp_path: Path, client: Any, cluster: Any,
                                                                  image_tag: str) -> None:
    from ingestion.rollouts import iter_rollout_states
    from ingestion.stats import IngestStats

    rows = [toy_instance(IDS[0], "fix"), toy_instance(IDS[1], "nofix")]
    names = sorted([f"{IDS[0]}.rollout.jsonl", f"{IDS[0]}.s1.rollout.jsonl",
                    f"{IDS[1]}.rollout.jsonl", f"{IDS[1]}.s1.rollout.jsonl"])
    with VLLMServer(toy_policy()) as server:
        report = finish(run_driver(tmp_path, rows, server.url, image_tag, "ray", "--ray", cluster.address,
                                   "--samples", "2"), tmp_path / "ray")
        argv = command(tmp_path, rows, server.url, image_tag, "--samples", "2", "--workers", "2")
        local = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    assert (report["started"], report["rollouts"], report["ok"]) == (4, 4, 4)
    assert [(o["instance_id"], o["sample"]) for o in report["outcomes"]] == [
        (IDS[0], 0), (IDS[0], 1), (IDS[1], 0), (IDS[1], 1)]
    assert sum(n["rollouts"] for n in report["nodes"].values()) == 4
    assert sorted(p.name for p in (tmp_path / "ray").glob("*.rollout.jsonl")) == names
    for name in names:
        ours, theirs = records(tmp_path / "ray" / name), records(tmp_path / "out" / name)
        assert normalised(ours) == normalised(theirs)
        assert ours[0]["sample"] == (1 if ".s1." in name else 0)
    stats = IngestStats()
    states = [s for name in names for s in iter_rollout_states(tmp_path / "ray" / name, stats)]
    assert len({s.state_id for s in states}) == len(states) == stats.states
    assert len({s.trace_id for s in states}) == 4
    assert leftovers(client) == []
