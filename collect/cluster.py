"""The Ray side of `collect.run --ray ADDRESS`: joining or starting a cluster, and what runs on its nodes.

A node takes rollouts when it advertises the custom resource `docker` (one unit per rollout it may run at
once): `ray start --address HEAD:6379 --resources '{"docker": 8}'` on a machine with a docker engine.
Every rollout task asks for one CPU and one `docker`; everything it needs (instance rows, the run's
config, the probe's findings) travels with the task, so nodes share no disk with the driver. Each node
builds or pulls its own images (`--pull`), exactly as a local run does.

Safe defaults for a cluster the tool starts itself (`--ray local`): it listens on 127.0.0.1 only, with
no dashboard and so no job API (which runs code for anyone who can reach it) unless `--ray-dashboard`.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import tempfile
from pathlib import Path
from typing import Any

from collect.config import CollectConfig, CollectError

log = logging.getLogger("collect")
LABEL_NODE = "teacher-replay.collect.node"   # value: the node's name in reports (node_name)
DOCKER = "docker"                          # the custom resource of nodes with a docker engine
OBJECT_STORE_BYTES = 256 * 1024 * 1024     # rollouts are small; the default (30% of RAM) is not
FORWARDED_ENV = ("LITELLM_LOCAL_MODEL_COST_MAP", "DOCKER_HOST")


def connect(address: str, dashboard: bool = False) -> dict[str, float]:
    """Join (`auto`, `HOST:PORT`, `ray://HOST:PORT`) or start (`local`) a cluster; its docker capacity.

    A cluster without a node that advertises `docker` is a CollectError: no rollout could be placed.
    """
    if address == "local":
        loopback_only()
    else:
        check_reachable(address)
    import ray

    env = {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}
    runtime_env = {"env_vars": env} if env else None
    try:
        if address == "local":
            cpus = os.cpu_count() or 1
            ray.init(address="local", num_cpus=cpus, resources={DOCKER: cpus}, include_dashboard=dashboard,
                     dashboard_host="127.0.0.1", runtime_env=runtime_env,
                     object_store_memory=OBJECT_STORE_BYTES, log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=address, runtime_env=runtime_env, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise CollectError(f"cannot join the Ray cluster at {address}: {str(exc).splitlines()[0]}") from None
    capacity = ray.cluster_resources()
    if not capacity.get(DOCKER):
        ray.shutdown()
        raise CollectError(f"no node of the Ray cluster at {address} advertises a `docker` resource: start "
                           "the nodes that have a docker engine with `ray start --address HEAD:6379 "
                           "--resources '{\"docker\": N}'`")
    return {"cpus": capacity.get("CPU", 0.0), DOCKER: capacity[DOCKER]}


def head_of(address: str) -> tuple[str, int] | None:
    """The (host, port) a HOST:PORT or ray://HOST:PORT address names; None for `auto`.

    >>> head_of("10.0.0.5:6379"), head_of("ray://head:10001"), head_of("auto")
    (('10.0.0.5', 6379), ('head', 10001), None)
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else None


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """One line now rather than Ray's retries for minutes when nothing listens at the address."""
    head = head_of(address)
    if head is None:
        return
    try:
        socket.create_connection(head, timeout=timeout).close()
    except OSError as exc:
        raise CollectError(f"cannot join the Ray cluster at {address}: {exc.strerror or exc}") from None


def loopback_only() -> None:
    """Make the Ray started next listen on 127.0.0.1 alone (its gRPC servers follow the node address).

    Ray turns a 127.0.0.1 node address into the machine's routable one unless clusters are "disabled",
    as on macOS and Windows (ray._private.services.get_node_ip_address); the processes it starts read the
    same variable, so they bind loopback too.
    """
    import sys

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    if "ray" in sys.modules:               # read at import: a test that imported ray first
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False


def docker_nodes() -> list[dict[str, Any]]:
    """The alive nodes that advertise `docker`."""
    import ray

    return [node for node in ray.nodes() if node.get("Alive") and node.get("Resources", {}).get(DOCKER)]


def node_name(node_id: str, address: str) -> str:
    """How reports name a node: its address and the head of its id (many local nodes share an address).

    >>> node_name("0123456789abcdef", "10.0.0.5")
    '10.0.0.5/01234567'
    """
    return f"{address}/{node_id[:8]}"


def here() -> str:
    """The node this task runs on, as reports name it."""
    import ray

    context = ray.get_runtime_context()
    try:
        address = ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001 - a name is only for the report
        address = socket.gethostname()
    return node_name(context.get_node_id(), address)


# --- what runs on the nodes ------------------------------------------------------------------------------

def probe_on_node(config_json: dict[str, Any], small: list[tuple[str | None, str]]) -> list[Any]:
    """The start-up probe, from a node that will run rollouts: a URL only the driver reaches fails here."""
    from collect.config import load_agent_spec
    from collect.probe import probe
    from collect.student import Backend, Student

    config = CollectConfig.model_validate(config_json)
    spec = load_agent_spec()
    student = Student(config, think_tags=spec.think_tags)
    targets = [(student.backend, config.student_model)]
    for url, model in small:
        targets.append((Backend(url, config.api_key, config.student_provider, config.request_timeout), model))
    return [probe(backend, model, spec, student.sampling) for backend, model in targets]


def prepare_on_node(claude_json: dict[str, Any], config_json: dict[str, Any], rows: list[Any],
                    run_id: str) -> dict[str, str]:
    """This node's Claude Code CLI, found as a local run finds it (--claude-binary, $REPLAY_CLAUDE_BINARY,
    the cache), else the pinned release fetched into this node's cache with npm, else the images' own
    (checked on the first instance image this node has); CollectError when there is none."""
    from collect.claude_code import ClaudeCodeAgent, ClaudeCodeOptions
    from collect.claude_code_cli import ensure_binary, load_claude_code_spec
    from collect.runtime import docker_client

    config = CollectConfig.model_validate(config_json)
    options = ClaudeCodeOptions.model_validate(claude_json)
    binary, why = ensure_binary(options.binary, load_claude_code_spec())
    agent = ClaudeCodeAgent(options.model_copy(update={"binary": binary}), config, docker_client(config),
                            run_id)
    if agent.binary is None:
        try:
            agent.check_images(rows)
        except CollectError as exc:
            raise CollectError(f"{exc} (fetching it here failed: {why})" if why else str(exc)) from None
    return {"node": here(), "cli": "copied" if agent.binary else "image"}


def rollout_on_node(config_json: dict[str, Any], row: Any, index: int, run_id: str, infos: list[Any],
                    labels: dict[str, str], sample: int = 0,
                    claude_json: dict[str, Any] | None = None) -> tuple[Any, dict[str, bytes], str]:
    """One (instance, sample) on this node: (its InstanceOutcome, its files relative to DIR, the node).

    Claude Code's recording proxy runs in this task, on the node's network of the run (one per node and
    run, shared by its tasks: see collect/claude_code.py proxy_network).
    """
    import ray

    node = here()
    network = f"{run_id}.claude-code.{ray.get_runtime_context().get_node_id()[:8]}" if claude_json else None
    outcome, files = rollout_in_scratch(config_json, row, index, sample, run_id, infos,
                                        {**labels, LABEL_NODE: node}, claude_json, network)
    outcome.node = node
    return outcome, files, node


def rollout_in_scratch(config_json: dict[str, Any], row: Any, index: int, sample: int, run_id: str,
                       infos: list[Any], labels: dict[str, str], claude_json: dict[str, Any] | None = None,
                       network: str | None = None) -> tuple[Any, dict[str, bytes]]:
    """One (instance, sample) rollout wherever this is called: (its InstanceOutcome, its files by their
    path relative to DIR). It runs in a scratch folder that is gone when this returns: the caller (the
    driver) alone writes outputs. A KeyboardInterrupt (a cancelled Ray task) removes its container first.

    `infos`: the probe's findings, the student's server first (then --small-url's, for Claude Code);
    `claude_json`: ClaudeCodeOptions to run Claude Code, its proxy here, on `network` (None: its own).
    """
    from collect.config import load_agent_spec
    from collect.evaluate import use_log_dir
    from collect.runner import Run, run_instance
    from collect.runtime import docker_client
    from collect.student import Student

    with tempfile.TemporaryDirectory(prefix="teacher-replay-collect-") as scratch:
        config = CollectConfig.model_validate({**config_json, "out": scratch, "workers": 1})
        spec = load_agent_spec()
        student = Student(config, think_tags=spec.think_tags)
        run = Run(config, spec, docker_client(config), student, run_id,
                  servers=_servers(config, student, infos), labels=labels, attempt=f".{secrets.token_hex(3)}")
        if config.evaluate:
            use_log_dir(Path(scratch) / "eval_logs")   # one task at a time per worker process
        try:
            if claude_json is not None:
                run.agent = _claude_agent(run, claude_json, network)
            outcome = run_instance(run, row, index, sample)
        except KeyboardInterrupt:
            run.stop.set()
            run.tracker.close()
            raise
        finally:
            if run.agent is not None:
                run.agent.close()          # the proxy; the node's network stays for its other rollouts
        files = rollout_files(Path(scratch), outcome.rollout_file)
    return outcome, files


def _claude_agent(run: Any, claude_json: dict[str, Any], network: str | None) -> Any:
    """Claude Code for one task: the node's CLI (a node that joined after the start fetches it now), its
    own proxy, on `network`; the node checked the images' own `claude` at the start when it has none."""
    from collect.claude_code import ClaudeCodeAgent, ClaudeCodeOptions
    from collect.claude_code_cli import ensure_binary, load_claude_code_spec

    options = ClaudeCodeOptions.model_validate(claude_json)
    binary, _ = ensure_binary(options.binary, load_claude_code_spec())
    agent = ClaudeCodeAgent(options.model_copy(update={"binary": binary}), run.config, run.client, run.run_id,
                            [backend for backend, _ in run.servers])
    agent.start([], network=network, labels=run.labels)
    return agent


def _servers(config: CollectConfig, student: Any, infos: list[Any]) -> list[tuple[Any, Any]]:
    """(Backend, its probe's ServerInfo) per server: the student's, then one per other URL probed."""
    from collect.student import Backend

    servers = [(student.backend, infos[0])]
    for info in infos[1:]:
        same = info.url == config.student_url
        backend = student.backend if same else Backend(info.url, config.api_key, config.student_provider,
                                                       config.request_timeout)
        servers.append((backend, info))
    return servers


def rollout_files(scratch: Path, rollout_file: str | None) -> dict[str, bytes]:
    """A rollout's files by their path relative to DIR: the mini agent's one file, or every regular file
    of Claude Code's rollout folder (links are not followed: nothing outside the folder is read)."""
    if rollout_file is None:
        return {}
    top = rollout_file.split("/")[0]
    if top == rollout_file:
        return {top: (scratch / top).read_bytes()}
    files = {}
    for path in sorted((scratch / top).rglob("*")):
        if path.is_file() and not path.is_symlink():
            files[path.relative_to(scratch).as_posix()] = path.read_bytes()
    return files


def remove_labelled(client: Any, labels: dict[str, str], keep_run: str | None = None) -> int:
    """Remove the engine's containers that carry every one of `labels` (all runs but `keep_run`); with no
    labels, none (an empty filter would match every container on the engine)."""
    from collect.runtime import LABEL, containers, remove_container

    if not labels:
        return 0
    filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
    gone = 0
    for container in containers(client, filters):
        if keep_run is not None and container.labels.get(LABEL) == keep_run:
            continue
        remove_container(container)
        gone += 1
    return gone


def sweep_on_node(labels: dict[str, str], keep_run: str | None = None) -> int:
    """Remove this node's containers and networks that carry every one of `labels` (all runs but
    `keep_run`); with no labels, nothing (`remove_labelled`)."""
    import docker

    from collect.runtime import LABEL, containers, remove_container

    if not labels:
        return 0
    client = docker.from_env()
    filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
    gone = remove_labelled(client, labels, keep_run)
    if "teacher-replay.collect" in labels:      # the harness's graders are named after the run
        for container in containers(client, {"name": labels[LABEL]}):
            remove_container(container)
            gone += 1
    for network in client.networks.list(filters=filters):   # Claude Code's, once its containers are gone
        if keep_run is not None and (network.attrs.get("Labels") or {}).get(LABEL) == keep_run:
            continue
        try:
            network.remove()
            Path(tempfile.gettempdir(), f"teacher-replay-{network.name}.lock").unlink(missing_ok=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:   # still in use: the next run on DIR removes it
            log.warning("cannot remove the network %s: %s", network.name, exc.explanation or exc)
    return gone


def first_line(exc: BaseException) -> str:
    """An error's first line, or its repr when it says nothing (what a Ray task's failure reports).

    >>> first_line(ValueError("a\\nb")), first_line(KeyboardInterrupt())
    ('a', 'KeyboardInterrupt()')
    """
    return (str(exc).splitlines() or [repr(exc)])[0][:500]
