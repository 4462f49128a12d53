"""Many branches (collect/branch.py): on this machine's engine, `workers` at a time, or as Ray tasks.

The caller hands jobs in and gets each result back through `on_done`, in the calling thread's order of
arrival, one at a time (it writes them down: a rerun then skips what is graded). Before any container the
students are probed (collect/probe.py), from a node that will run branches with `--ray`: a server no
branch could use is one CollectError. Every container carries the run's labels and none outlives the run:
each branch removes its own, the run sweeps its labels at the end and on Ctrl-C (every node with --ray).
A state's snapshot (collect/snapshot.py) is removed once its last branch has ended, and every one of the
run's at its end.

With --ray: one task per branch (a CPU and a `docker` unit, as a rollout); a node lost mid-branch has its
tasks run again elsewhere (collect.on_ray.RETRIES times at most), and only the attempt Ray returns is
handed to `on_done`, so every branch is counted once whichever attempt answered.
"""

from __future__ import annotations

import logging
import queue
import secrets
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from collect.branch import BranchContext, BranchJob, BranchResult, run_branch
from collect.cluster import first_line, remove_labelled
from collect.config import CollectConfig, CollectError, load_agent_spec
from collect.runtime import LABEL, docker_client, sweep
from collect.snapshot import forget, remove_on_node, remove_snapshots

log = logging.getLogger("collect")
Done = Callable[[BranchJob, BranchResult], None]
INTERRUPT_GRACE_S = 10.0


def new_verify_id() -> str:
    from datetime import UTC, datetime

    return f"verify-{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"


def distinct_students(jobs: Sequence[BranchJob]) -> list[dict[str, Any]]:
    """One config per student server and model the jobs ask (what the probe looks at).

    >>> job = lambda url: BranchJob.model_construct(config={"student_url": url, "student_model": "m"})
    >>> [c["student_url"] for c in distinct_students([job("a"), job("b"), job("a")])]
    ['a', 'b']
    """
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for job in jobs:
        config = job.config
        seen.setdefault((config.get("student_url"), config.get("student_model"),
                         config.get("student_provider")), config)
    return list(seen.values())


def probe_students(configs: Sequence[dict[str, Any]]) -> list[Any]:
    """The start-up probe of each student (a CollectError, one line, for one no branch could use)."""
    from collect.probe import probe
    from collect.student import Student

    spec = load_agent_spec()
    infos = []
    for data in configs:
        config = CollectConfig.model_validate(data)
        student = Student(config, think_tags=spec.think_tags)
        infos.append(probe(student.backend, config.student_model, spec, student.sampling))
    return infos


def run_here(jobs: Sequence[BranchJob], on_done: Done, workers: int, run_id: str,
             labels: dict[str, str] | None = None) -> None:
    """Every job on this machine's docker engine, `workers` at a time. KeyboardInterrupt: the branches
    stop, every container of the run is removed, and the interrupt goes on to the caller."""
    from collect.evaluate import use_log_dir

    if not jobs:
        return
    probe_students(distinct_students(jobs))
    config = CollectConfig.model_validate(jobs[0].config)
    client = docker_client(config.model_copy(update={"workers": workers}))
    if left := remove_labelled(client, labels or {}, keep_run=run_id):
        log.info("removed %d containers an earlier verification of this folder left", left)
    if labels:
        remove_snapshots(client, labels, keep_run=run_id)
    with tempfile.TemporaryDirectory(prefix="teacher-replay-verify-") as scratch:
        context = BranchContext(client, run_id, Path(scratch) / "eval_logs", labels=dict(labels or {}))
        use_log_dir(context.log_dir)
        threads = _workers(jobs, on_done, workers, context)
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        except KeyboardInterrupt:
            context.stop.set()
            context.tracker.close()
            sweep(client, run_id)
            deadline = time.monotonic() + INTERRUPT_GRACE_S
            for thread in threads:
                thread.join(max(deadline - time.monotonic(), 0))
            raise
        finally:
            sweep(client, run_id)          # nothing of this run outlives it, whatever happened
            remove_snapshots(client, {LABEL: run_id})
            forget(run_id)


def _workers(jobs: Sequence[BranchJob], on_done: Done, workers: int,
             context: BranchContext) -> list[threading.Thread]:
    """Threads that take jobs in turn until none is left or the run stops; daemons, so a branch stuck in
    a long student request does not keep an interrupted process alive."""
    pending: queue.SimpleQueue[BranchJob] = queue.SimpleQueue()
    for job in jobs:
        pending.put(job)
    remaining = Counter(job.state_key for job in jobs)     # a state's snapshot goes with its last branch
    lock = threading.Lock()

    def work() -> None:
        while not context.stop.is_set():
            try:
                job = pending.get_nowait()
            except queue.Empty:
                return
            result = run_branch(job, context)
            if context.stop.is_set():
                return                     # interrupted: not a branch's outcome
            with lock:
                on_done(job, result)
                remaining[job.state_key] -= 1
                last = not remaining[job.state_key]
            if last:
                remove_snapshots(context.client, {LABEL: context.run_id}, state_key=job.state_key)

    return [threading.Thread(target=work, name=f"verify-{n}", daemon=True)
            for n in range(min(workers, len(jobs)))]


def branch_on_node(job_json: dict[str, Any], run_id: str, labels: dict[str, str]) -> dict[str, Any]:
    """A Ray task: one branch on this node; its result as JSON (the driver alone writes outputs)."""
    from collect.cluster import LABEL_NODE, here
    from collect.evaluate import use_log_dir

    job = BranchJob.model_validate(job_json)
    node = here()
    config = CollectConfig.model_validate(job.config)
    with tempfile.TemporaryDirectory(prefix="teacher-replay-verify-") as scratch:
        context = BranchContext(docker_client(config), run_id, Path(scratch) / "eval_logs",
                                labels={**labels, LABEL_NODE: node}, attempt=f".{secrets.token_hex(3)}")
        use_log_dir(context.log_dir)       # one task at a time per worker process
        try:
            result = run_branch(job, context)
        except KeyboardInterrupt:          # cancelled by the driver: its container goes first
            context.stop.set()
            context.tracker.close()
            raise
    result.node = node
    return result.model_dump(mode="json")


def probe_on_a_node(configs: list[dict[str, Any]]) -> list[Any]:
    """A Ray task: the probe from a node that runs branches (a URL only the driver reaches fails here)."""
    return [info.model_dump(mode="json") for info in probe_students(configs)]


def run_on_ray(jobs: Sequence[BranchJob], on_done: Done, address: str, run_id: str,
               labels: dict[str, str], dashboard: bool = False) -> dict[str, Any]:
    """Every job as a Ray task; the cluster's figures for the report (`address`, `nodes`, `nodes_lost`)."""
    import ray

    from collect.cluster import connect, docker_nodes

    capacity = connect(address, dashboard)
    try:
        nodes_at_start = {node["NodeID"] for node in docker_nodes()}
        figures: dict[str, Any] = {"address": address, "docker": capacity["docker"],
                                   "nodes": len(nodes_at_start)}
        if jobs:
            _on_ray(jobs, on_done, run_id, labels)
        figures["nodes_lost"] = len(nodes_at_start - {node["NodeID"] for node in docker_nodes()})
        return figures
    finally:
        ray.shutdown()


def _on_ray(jobs: Sequence[BranchJob], on_done: Done, run_id: str, labels: dict[str, str]) -> None:
    import ray

    from collect.cluster import DOCKER
    from collect.on_ray import CANCEL_GRACE_S, PROBE_TIMEOUT_S, RETRIES, sweep_nodes

    probe = ray.remote(num_cpus=0, resources={DOCKER: 0.001}, max_retries=RETRIES)(probe_on_a_node)
    try:
        ray.get(probe.remote(distinct_students(jobs)), timeout=PROBE_TIMEOUT_S)
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if isinstance(exc.cause, Exception) else exc
        raise CollectError(f"{cause} (from a Ray node)" if isinstance(cause, CollectError)
                           else f"the start-up check failed on a Ray node: {cause!r}") from None
    left = sweep_nodes(labels, keep_run=run_id)            # what a lost node or a killed driver left
    if left:
        log.info("removed %d containers an earlier verification of this run left", left)
    _on_every_node(labels, run_id)
    task = ray.remote(num_cpus=1, resources={DOCKER: 1}, max_retries=RETRIES)(branch_on_node)
    pending = {task.remote(job.model_dump(mode="json"), run_id, labels): job for job in jobs}
    remaining, removals = Counter(job.state_key for job in jobs), []
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                job = pending.pop(ref)
                on_done(job, _receive(ref, job))
                remaining[job.state_key] -= 1
                if not remaining[job.state_key]:     # the state's snapshots go with its last branch
                    removals += _on_every_node({LABEL: run_id}, state_key=job.state_key, wait=False)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref)                # KeyboardInterrupt in the task: it removes its container
        deadline = time.monotonic() + CANCEL_GRACE_S
        for ref in list(pending):
            try:
                ray.get(ref, timeout=max(deadline - time.monotonic(), 0.1))
            except Exception:  # noqa: BLE001 - cancelled, lost or late: the sweep below removes the rest
                pass
        raise
    finally:
        sweep_nodes({LABEL: run_id})       # nothing of this run outlives it, on any node still there
        _wait(removals)
        _on_every_node({LABEL: run_id})


def _on_every_node(labels: dict[str, str], keep_run: str | None = None, state_key: str | None = None,
                   wait: bool = True) -> list[Any]:
    """`collect.snapshot.remove_on_node` on every alive docker node; its task refs when not waited for."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from collect.cluster import docker_nodes

    task = ray.remote(num_cpus=0, max_retries=0)(remove_on_node)
    refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))
            .remote(labels, keep_run, state_key) for node in docker_nodes()]
    if wait:
        _wait(refs)
        return []
    return refs


def _wait(refs: list[Any]) -> None:
    import ray

    for ref in refs:
        try:
            ray.get(ref, timeout=120)
        except Exception as exc:  # noqa: BLE001 - a node lost now: the next verification removes its images
            log.warning("a node could not remove its snapshots: %s", first_line(exc))


def _receive(ref: Any, job: BranchJob) -> BranchResult:
    """A task's result; a task Ray gave up on (its node lost every time) is a result too, ungraded."""
    import ray

    try:
        return BranchResult.model_validate(ray.get(ref))
    except ray.exceptions.RayTaskError as exc:     # the task's own failure (run_branch keeps its errors)
        return BranchResult(key=job.key, error_kind="internal_error", error=first_line(exc.cause or exc))
    except ray.exceptions.RayError as exc:         # retries spent on lost nodes or crashed workers
        return BranchResult(key=job.key, error_kind="node_lost", error=first_line(exc))
