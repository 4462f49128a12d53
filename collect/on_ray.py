"""`collect.run --ray ADDRESS`: one Ray task per (instance, sample), the driver alone writing DIR.

- `--agent claude-code`: each task runs its own recording proxy beside its container, on the node's
  network of the run; every node resolves its own CLI at the start (collect/cluster.py prepare_on_node).
  The rollout folder (rollout.jsonl, proxy.jsonl, the CLI's session) comes back with the task.

- The student is probed from a node that will run rollouts (a URL only the driver can reach fails at
  once, one line). Rows that cannot run are reported by the driver without a task.
- A finished rollout in DIR (a final record whose rollout the student ended, graded when --evaluate) is
  read back, not run again: a rerun after a crash or Ctrl-C starts only what is missing.
- Each task's rollout comes back whole and is written atomically (temporary file or folder, then
  rename): a rollout in DIR is always complete, and each (instance, sample) is written once, whichever
  attempt of its task answered.
- A node lost mid-run: Ray runs its tasks again elsewhere (`RETRIES` times at most); the containers it
  left carry the run's labels and are removed by the sweep every node runs at the end of the run (a node
  that came back included) and by the next run on the same DIR.
- Ctrl-C: the tasks are cancelled (each removes its container), every node sweeps the run's
  containers, report.json is still written.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from collect.cluster import (
    DOCKER,
    connect,
    docker_nodes,
    first_line,
    prepare_on_node,
    probe_on_node,
    rollout_on_node,
    sweep_on_node,
)
from collect.config import CollectConfig, CollectError
from collect.instances import check_instance, duplicates, instance_label, load_instances, rollout_filename
from collect.report import InstanceOutcome, RunReport, write_report
from collect.runner import _logprobs_mode, final_outcome, new_run_id
from collect.runtime import LABEL
from collect.student import sampling_of
from ingestion.rollout_format import GRADED
from ingestion.rollouts import read_rollout
from ingestion.stats import IngestStats

log = logging.getLogger("collect")
RETRIES = 3                                # attempts after a lost node or a crashed worker process
LABEL_OUT = "teacher-replay.collect.out"   # value: out_key(DIR): the next run on DIR sweeps what is left
CANCEL_GRACE_S = 20.0
PROBE_TIMEOUT_S = 600.0


def out_key(out: Path) -> str:
    """A stable name for the output folder of this driver, as a container label value."""
    where = f"{socket.gethostname()}:{out.resolve()}"
    return hashlib.sha256(where.encode()).hexdigest()[:16]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def resumed_outcome(out: Path, row: Any, evaluate: bool, sample: int = 0,
                    claude: bool = False) -> InstanceOutcome | None:
    """The outcome of a rollout a previous run finished in `out`, or None when it must run (again).
    `claude`: a Claude Code rollout folder (its token ids are in proxy.jsonl)."""
    from collect.claude_code import ROLLOUT_FILE, rollout_folder, token_turns

    instance_id = row["instance_id"]
    name = (f"{rollout_folder(instance_id, sample)}/{ROLLOUT_FILE}" if claude
            else rollout_filename(instance_id, sample))
    path = out / name
    if not path.is_file():
        return None
    header, turns, final = read_rollout(path, IngestStats())
    if header is None or header.instance_id != instance_id or header.sample != sample or final is None:
        return None
    if final.exit_status not in GRADED or (evaluate and final.reward is None):
        return None                        # interrupted, an infrastructure error, an ungraded patch
    tokens = token_turns(path.parent) if claude else sum(t.completion_token_ids is not None for t in turns)
    breaks = sum(turn.prefix_ok is False for turn in turns)
    outcome = final_outcome(instance_id, name, final, tokens, evaluate, breaks)
    outcome.resumed, outcome.elapsed_s, outcome.sample = True, final.elapsed_s, sample
    return outcome


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_rollout(out: Path, rollout_file: str, files: dict[str, bytes]) -> None:
    """A task's rollout into `out`: the mini agent's file, or Claude Code's folder, each replaced whole.

    A folder is written beside its place (`.<name>.tmp`) and renamed into it; one an earlier run left is
    moved aside first (`.<name>.old`, removed after). A reader never sees half a folder; a driver killed
    between the two renames leaves no folder, and the next run does that rollout again.
    """
    top = rollout_file.split("/")[0]
    if top == rollout_file:
        write_atomically(out / top, files[top])
        return
    inside = {name: PurePosixPath(name).parts for name in files}
    for name, parts in inside.items():
        if parts[0] != top or ".." in parts or len(parts) < 2:
            raise ValueError(f"{name!r} is not a file of the rollout folder {top}")
    tmp, old, final = out / f".{top}.tmp", out / f".{top}.old", out / top
    for stale in (tmp, old):
        shutil.rmtree(stale, ignore_errors=True)
    for name, data in files.items():
        path = tmp.joinpath(*inside[name][1:])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    tmp.mkdir(exist_ok=True)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def on_every_node(function: Any, *args: Any, timeout: float = 120) -> list[Any]:
    """`function(*args)` on every alive docker node at once; each node's result, or the exception it
    raised (a Ray error: the node was lost meanwhile)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0, max_retries=0)(function)
    refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))
            .remote(*args) for node in docker_nodes()]
    results: list[Any] = []
    for ref in refs:
        try:
            results.append(ray.get(ref, timeout=timeout))
        except Exception as exc:  # noqa: BLE001 - the caller decides what a node's failure means
            results.append(exc)
    return results


def sweep_nodes(labels: dict[str, str], keep_run: str | None = None) -> int:
    """Every alive docker node removes its containers (and networks) carrying `labels` (but `keep_run`'s)."""
    gone = 0
    for result in on_every_node(sweep_on_node, labels, keep_run):
        if isinstance(result, Exception):   # a node lost now is swept by the next run
            log.warning("a node could not sweep its containers: %s", first_line(result))
        else:
            gone += result
    return gone


def prepare_nodes(claude: Any, config_json: dict[str, Any], rows: list[Any], run_id: str) -> dict[str, str]:
    """Every docker node finds (or fetches) its Claude Code CLI before any rollout: {node: copied|image};
    a node that has none is a CollectError, one line, naming the node."""
    import ray

    ids = [{"instance_id": row.get("instance_id")} for row in rows if isinstance(row, dict)]   # all it reads
    found = {}
    for result in on_every_node(prepare_on_node, claude.model_dump(mode="json"), config_json, ids, run_id,
                                timeout=PROBE_TIMEOUT_S):
        if isinstance(result, ray.exceptions.RayTaskError) and isinstance(result.cause, CollectError):
            raise CollectError(f"{result.cause} (on a Ray node)") from None
        if isinstance(result, Exception):
            log.warning("a node could not look for its Claude Code CLI: %s", first_line(result))
            continue
        found[result["node"]] = result["cli"]
    return found


def collect_on_ray(config: CollectConfig, address: str, dashboard: bool = False, quiet: bool = False,
                   claude: Any = None) -> RunReport:
    """`claude` (ClaudeCodeOptions): run Claude Code instead of the bash/edit loop."""
    import ray

    rows = load_instances(config.instances)
    capacity = connect(address, dashboard)
    try:
        return _collect(config, rows, address, capacity, quiet, claude)
    finally:
        ray.shutdown()


def _collect(config: CollectConfig, rows: list[Any], address: str, capacity: dict[str, float],
             quiet: bool, claude: Any) -> RunReport:
    import ray

    config_json = config.model_dump(mode="json")
    small = []                             # Claude Code's small model's server, probed like the student's
    if claude is not None and (claude.small_url or claude.small_backend):
        small = [(claude.small_url or config.student_url, claude.small_backend or config.student_model)]
    probe = ray.remote(num_cpus=0, resources={DOCKER: 0.001}, max_retries=RETRIES)(probe_on_node)
    try:
        infos = ray.get(probe.remote(config_json, small), timeout=PROBE_TIMEOUT_S)
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if isinstance(exc.cause, Exception) else exc
        raise CollectError(f"{cause} (from a Ray node)" if isinstance(cause, CollectError)
                           else f"the start-up check failed on a Ray node: {cause!r}") from None
    run_id = new_run_id()
    clis = prepare_nodes(claude, config_json, rows, run_id) if claude is not None else None
    try:
        config.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CollectError(f"cannot create the output folder {config.out}: {exc.strerror}") from exc
    labels = {LABEL_OUT: out_key(config.out)}
    left = sweep_nodes(labels, keep_run=run_id)            # what a lost node or a killed driver left
    if left:
        log.info("removed %d containers an earlier run on %s left", left, config.out)
    nodes_at_start = {node["NodeID"] for node in docker_nodes()}
    report = RunReport(run_id=run_id, student_model=config.student_model, student_url=config.student_url,
                       student_provider=config.student_provider, sampling=sampling_of(config),
                       logprobs_mode=_logprobs_mode(config), evaluate=config.evaluate, started_at=_now(),
                       instances=len(rows), servers=infos, started=0,
                       ray={"address": address, "docker": capacity[DOCKER], "cpus": capacity["cpus"],
                            "nodes": len(nodes_at_start)}, seed=config.seed)
    if clis is not None:
        report.ray["claude_code_cli"] = clis
    claude_json = claude.model_dump(mode="json") if claude is not None else None
    rollout = ray.remote(num_cpus=1, resources={DOCKER: 1}, max_retries=RETRIES)(rollout_on_node)
    repeated = duplicates(rows)
    pending: dict[Any, tuple[int, str, int]] = {}
    for index, row in enumerate(rows):
        label = instance_label(row, index)
        problem = check_instance(row, config.evaluate) or repeated.get(index)
        if problem:
            report.add(InstanceOutcome(instance_id=label, error_kind="invalid_instance", error=problem))
            continue
        for sample in range(config.samples):
            finished = resumed_outcome(config.out, row, config.evaluate, sample, claude is not None)
            if finished is not None:
                report.add(finished)
                report.resumed += 1
                continue
            ref = rollout.remote(config_json, row, index, run_id, infos, labels, sample, claude_json)
            pending[ref] = (index, label, sample)
    report.started = len(pending)
    progress = _Progress(len(pending), quiet)
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                _, label, sample = pending.pop(ref)
                outcome = _receive(ref, label, sample, config.out)
                report.add(outcome)
                progress.done(outcome)
    except KeyboardInterrupt:
        report.interrupted = True
        for ref in pending:
            ray.cancel(ref)                # KeyboardInterrupt in the task: it removes its container
        deadline = time.monotonic() + CANCEL_GRACE_S
        for ref, (_, label, sample) in list(pending.items()):
            try:
                outcome = _receive(ref, label, sample, config.out,
                                   timeout=max(deadline - time.monotonic(), 0.1))
            except (ray.exceptions.GetTimeoutError, ray.exceptions.TaskCancelledError):
                outcome = InstanceOutcome(instance_id=label, sample=sample, error_kind="interrupted",
                                          error="interrupted")
            report.add(outcome)
    finally:
        progress.close()
        sweep_nodes({LABEL: run_id})       # nothing of this run outlives it, on any node still there
        report.finished_at = _now()
        report.ray["nodes_lost"] = len(nodes_at_start - {node["NodeID"] for node in docker_nodes()})
        write_report(report, config.out / "report.json")
    return report


def _receive(ref: Any, label: str, sample: int, out: Path, timeout: float | None = None) -> InstanceOutcome:
    """A task's result: its rollout written to DIR, its outcome returned; a task Ray gave up on is one too."""
    import ray

    try:
        outcome, files, _ = ray.get(ref, timeout=timeout)
    except ray.exceptions.TaskCancelledError:
        raise
    except ray.exceptions.GetTimeoutError:
        raise
    except ray.exceptions.RayTaskError as exc:   # the task's own failure (run_instance keeps its errors)
        kind = "interrupted" if isinstance(exc.cause, KeyboardInterrupt) else "internal_error"
        return InstanceOutcome(instance_id=label, sample=sample, error_kind=kind,
                               error=first_line(exc.cause or exc))
    except ray.exceptions.RayError as exc:   # retries spent on lost nodes or crashed worker processes
        kind = "node_lost"
        return InstanceOutcome(instance_id=label, sample=sample, error_kind=kind,
                               error=first_line(exc))
    if files and outcome.rollout_file:
        write_rollout(out, outcome.rollout_file, files)
    return outcome


class _Progress:
    """A bar with the rollouts done per node (rich, as replay.run's), or nothing with -q."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.per_node: Counter[str] = Counter()
        self.bar: Any = None
        if quiet or not total:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("rollouts"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("{task.fields[nodes]}"), transient=False)
        self.task = self.bar.add_task("rollouts", total=total, nodes="")
        self.bar.start()

    def done(self, outcome: InstanceOutcome) -> None:
        self.per_node[outcome.node or "?"] += 1
        if self.bar is not None:
            nodes = " ".join(f"{node}={n}" for node, n in sorted(self.per_node.items()))
            self.bar.update(self.task, advance=1, nodes=nodes)
        else:
            status = outcome.exit_status or outcome.error_kind
            log.info("%s: %s on %s", outcome.instance_id, status, outcome.node)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
