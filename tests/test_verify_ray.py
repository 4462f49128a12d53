"""`python -m replay.verify --ray` against a real Ray cluster on this machine (`-m docker`): a node removed
while it holds a branch, and every branch done exactly once all the same.

The cluster is tests/test_collect_ray.py's (ray.cluster_utils.Cluster: a head that runs nothing, three
worker nodes with one CPU and one `docker` unit each, all on 127.0.0.1 and the local engine); the
rollouts and the run are tests/test_verify_docker.py's toy.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from collect.cluster import LABEL_NODE
from collect.runtime import LABEL, containers
from tests.test_collect_ray import WORKERS, cluster  # noqa: F401  (the fixture)
from tests.test_verify_docker import CASES, ROOT, Toy, by_instance, leftovers, toy  # noqa: F401
from tests.verify_toy import EXPECTED

pytestmark = pytest.mark.docker


def branch_nodes(client: Any) -> dict[str, str]:
    """The node each running branch container of a verification is on."""
    return {c.name: c.labels[LABEL_NODE] for c in containers(client, {"label": LABEL_NODE}, running=True)
            if c.labels.get(LABEL, "").startswith("verify-")}


def test_a_node_lost_mid_verification_leaves_every_branch_done_once(tmp_path: Path, client: Any,
                                                                    cluster: Any, toy: Toy) -> None:  # noqa: F811
    run = toy.run(tmp_path / "run")
    driver = subprocess.Popen([sys.executable, "-m", "replay.verify", "--run", str(run), "--rollouts",
                               str(toy.rollouts), "--instances", str(toy.instances), "--samples", "2",
                               "--ray", cluster.address], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    deadline, busy = time.monotonic() + 180, {}
    while not busy and time.monotonic() < deadline and driver.poll() is None:
        busy = branch_nodes(client)
        time.sleep(0.1)
    assert busy, "a branch ran on a worker node"
    holder = next(iter(busy.values())).rsplit("/", 1)[1]
    lost = next(node for node in cluster.worker_nodes if node.node_id[:8] == holder)
    cluster.remove_node(lost, allow_graceful=False)           # mid-branch: its container is still up
    _, stderr = driver.communicate(timeout=900)
    assert driver.returncode == 0, stderr

    lines = [json.loads(line) for line in (run / "verify/branches.jsonl").read_text().splitlines()]
    assert Counter(line["key"] for line in lines) == Counter({line["key"]: 1 for line in lines})
    assert len(lines) == 12 and all(line["result"]["reward"] is not None for line in lines)
    assert {line["result"]["node"].rsplit("/", 1)[1] for line in lines} <= {
        node.node_id[:8] for node in cluster.worker_nodes}                # none credited to the lost node
    report = json.loads((run / "report.json").read_text())["verify"]
    assert (report["ray"]["nodes"], report["ray"]["nodes_lost"]) == (WORKERS, 1)
    differed = [(line["key"][:12], line["result"]["node"], line["result"]["restored"], mismatch)
                for line in lines for mismatch in line["result"].get("mismatches") or []]
    counts = [report[k] for k in ("verified", "flipped", "tied", "restore_mismatches")]
    assert counts == [1, 1, 1, 0], differed
    values = [json.loads(line) for line in (run / "verify/values.jsonl").read_text().splitlines()]
    assert by_instance(values) == {i: EXPECTED[script] for i, script in CASES.items()}
    assert leftovers(client) == []                             # the lost node's container too
