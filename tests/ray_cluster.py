"""A real Ray cluster on this machine for the `-m docker` Ray tests: a head that runs nothing (0 CPUs)
and worker nodes that each hold one `docker` unit, as `collect.run --ray` asks of a rollout."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from collect.cluster import LABEL_NODE, loopback_only
from collect.runtime import containers

NODE_ARGS = {"num_cpus": 1, "resources": {"docker": 1}, "object_store_memory": 80 * 1024 * 1024}


def ray_cluster(workers: int) -> Iterator[Any]:
    """A `ray.cluster_utils.Cluster` with `workers` worker nodes, shut down when the generator closes
    (a module fixture's body: `yield from ray_cluster(WORKERS)`)."""
    loopback_only()
    from ray.cluster_utils import Cluster

    made = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 * 1024 * 1024})
    for _ in range(workers):
        made.add_node(**NODE_ARGS)
    made.wait_for_nodes()
    yield made
    made.shutdown()


def node_containers(client: Any) -> dict[str, str]:
    """The node each running rollout container of a --ray run is on (container name -> node)."""
    return {c.name: c.labels[LABEL_NODE] for c in containers(client, {"label": LABEL_NODE}, running=True)}
