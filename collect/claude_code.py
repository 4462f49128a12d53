"""`collect.run --agent claude-code`: the student plays Claude Code's brain inside each instance container.

Per run (`ClaudeCodeAgent.start`): the CLI binary is resolved (--claude-binary, $REPLAY_CLAUDE_BINARY,
the cache of the version pinned in configs/claude_code_cli.toml, else a `claude` baked into the
images); an internal docker network is created (no route anywhere but the host, its gateway); the
recording proxy (collect/proxy.py) listens on that gateway, in front of the student's server.
Per instance (`drive`): the container joins the network, the CLI is copied in (unless baked in), and
`claude -p` runs in /testbed with ANTHROPIC_BASE_URL = the proxy; then the CLI's files are copied out.
The patch and the reward come from collect/runner.py exactly as for the minimal agent.

What one instance leaves in DIR/<instance_id>/ (sample k > 0 of --samples: DIR/<instance_id>.s<k>/;
ingestion/claude_rollouts.py reads it):
  rollout.jsonl   header (agent "claude-code", CLI version, model map) and final (patch, reward)
  proxy.jsonl     one exchange per Messages request: token ids, logprobs (ingestion/rollout_format.py)
  claude/         the CLI's config dir; its session is claude/projects/-testbed/<session id>.jsonl
  prompt.md, result.json (the `--output-format json` result), stderr.txt
"""

from __future__ import annotations

import fcntl
import secrets
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from collect.agent import AgentResult
from collect.claude_code_cli import find_binary, load_claude_code_spec
from collect.claude_code_session import (
    BIN_DIR,
    COPIED_BINARY,
    PROMPT,
    RESULT,
    STDERR,
    WORK,
    extract_work,
    install_binary,
    parse_result,
    read_head,
    session_argv,
    session_env,
    session_outcome,
)
from collect.config import CollectConfig, CollectError
from collect.runtime import LABEL, Interrupted, Runtime, RuntimeFailure
from ingestion.jsonl import iter_records
from ingestion.rollout_format import RolloutHeader
from ingestion.schema import StrictModel
from ingestion.stats import IngestStats

ROLLOUT_FILE, PROXY_FILE = "rollout.jsonl", "proxy.jsonl"
OUTPUTS = (ROLLOUT_FILE, PROXY_FILE, PROMPT, RESULT, STDERR, "claude")
# The rollouts sharing the proxy's network reach its gateway (the proxy) and never each other.
NETWORK_OPTIONS = {"com.docker.network.bridge.enable_icc": "false"}


def rollout_folder(instance_id: str, sample: int = 0) -> str:
    """The folder of one (instance, sample) rollout under DIR (the mini agent's files are named alike).

    >>> rollout_folder("a__b-1"), rollout_folder("a__b-1", 2)
    ('a__b-1', 'a__b-1.s2')
    """
    return f"{instance_id}.s{sample}" if sample else instance_id


def token_turns(folder: Path) -> int:
    """The answered main requests with token ids in a rollout folder's proxy.jsonl, as `drive` counted them
    (a rerun that finds the rollout finished reads them back)."""
    try:
        records = [record for _, record in iter_records(folder / PROXY_FILE, IngestStats())]
    except OSError:
        return 0
    return sum(r.get("role") == "main" and not r.get("error") and r.get("completion_token_ids") is not None
               for r in records)


def proxy_network(client: Any, name: str, labels: dict[str, str], shared: bool = False) -> Any:
    """The internal docker network the proxy listens on (its gateway is the host).

    `shared`: the tasks of one Ray node join one network per run (a docker engine has room for about 30
    bridge networks with its default address pools); the first creates it, under a lock on this machine.
    """
    if not shared:
        return _create_network(client, name, labels)
    with open(Path(tempfile.gettempdir()) / f"teacher-replay-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = [network for network in client.networks.list(names=[name]) if network.name == name]
        if found:
            found[0].reload()
            return found[0]
        return _create_network(client, name, labels)


def _create_network(client: Any, name: str, labels: dict[str, str]) -> Any:
    network = client.networks.create(name, driver="bridge", internal=True, labels=labels,
                                     check_duplicate=True, options=NETWORK_OPTIONS)
    network.reload()
    return network


class ClaudeCodeOptions(StrictModel):
    binary: Path | None = None             # None: $REPLAY_CLAUDE_BINARY, the cache, or the image's own
    model: str = "claude-sonnet-4-6"       # the name the CLI asks for as its main ("high") model
    small_model: str = "claude-haiku-4-5"  # its "low" model: titles, summaries, some subagents
    small_backend: str | None = None       # the served model answering `small_model` (default: the student)
    small_url: str | None = None           # its server, when not the student's (e.g. a second, smaller vLLM)
    timeout: int = Field(1800, ge=10)      # seconds for one session


class ClaudeRolloutHeader(RolloutHeader):
    agent: Literal["claude-code"] = "claude-code"
    cli_version: str
    cli_source: str                        # "copied" (from the host) or "image"
    models: dict[str, str]                 # model name the CLI asks for → served model
    urls: dict[str, str | None] = {}       # model name the CLI asks for → the server answering it


class ClaudeCodeAgent:
    """Locally, shared by the run's workers: one proxy and one network per run. On Ray, one per task
    (collect/cluster.py rollout_in_scratch), its proxy on the node's network of the run."""

    def __init__(self, options: ClaudeCodeOptions, config: CollectConfig, client: Any, run_id: str,
                 backends: list[Any] | None = None) -> None:
        self.options = options
        self.backends = backends or []     # collect.student.Backend, probed: the proxy shares them
        self.config = config
        self.client = client
        self.run_id = run_id
        self.spec = load_claude_code_spec()
        self.binary = find_binary(options.binary, self.spec)
        self.models = {options.model: config.student_model,
                       options.small_model: options.small_backend or config.student_model}
        self.network: Any = None
        self.owns_network = False
        self.proxy: Any = None
        self.exec_client: Any = None

    @property
    def network_name(self) -> str:
        return self.network.name if self.network is not None else "none"

    def start(self, rows: list[Any], network: str | None = None,
              labels: dict[str, str] | None = None) -> None:
        """Check a CLI is at hand (in the first image of `rows` present, when none is on this machine), then
        the network, the proxy and a client for hour-long execs.

        `network`: a network shared with other rollouts (a Ray node's, per run), joined or created, left in
        place by `close`; None: this run's own. `labels`: the network's, on top of the run's.
        """
        import docker

        if self.binary is None:
            self.check_images(rows)
        try:
            self._start_network_and_proxy(network, labels or {})
        except BaseException:
            self.close()
            raise
        # `claude -p` prints nothing until it ends: the socket must outlast the session.
        self.exec_client = docker.from_env(timeout=self.options.timeout + 120)

    def _start_network_and_proxy(self, shared: str | None, labels: dict[str, str]) -> None:
        import docker

        from collect.proxy import AnthropicProxy, ProxyConfig, ProxyError

        try:
            self.network = proxy_network(self.client, shared or f"{self.run_id}.claude-code",
                                         {**labels, LABEL: self.run_id}, shared=shared is not None)
            self.owns_network = shared is None
            gateway = self.network.attrs["IPAM"]["Config"][0]["Gateway"]
        except (docker.errors.APIError, KeyError, IndexError) as exc:
            raise CollectError(f"cannot create the docker network for the proxy: {exc}") from exc
        urls = {self.options.small_model: self.options.small_url} if self.options.small_url else {}
        config = ProxyConfig(backend_url=self.config.student_url, api_key=self.config.api_key,
                             provider=self.config.student_provider, models=self.models, urls=urls,
                             default_backend=self.config.student_model, main_models=[self.options.model],
                             temperature=self.config.temperature, top_p=self.config.top_p,
                             max_tokens=self.config.max_tokens, request_timeout=self.config.request_timeout,
                             reasoning_echo=self.config.reasoning_echo)
        try:
            self.proxy = AnthropicProxy(config, host=gateway, backends=self.backends).start()
        except ProxyError as exc:
            raise CollectError(f"the proxy for Claude Code: {exc}") from exc

    def close(self) -> None:
        """After the run's containers are gone (the network cannot go before them)."""
        if self.proxy is not None:
            self.proxy.close()
        if self.network is not None and self.owns_network:
            try:
                self.network.remove()
            except Exception:  # a leftover network must not hide the run's report
                pass
        if self.exec_client is not None:
            self.exec_client.close()

    def check_images(self, rows: list[Any]) -> None:
        """No binary on the host: the first instance image present must carry `claude` itself."""
        import docker

        from collect.instances import image_name

        ids = [row.get("instance_id") for row in rows if isinstance(row, dict)]
        for instance_id in (i for i in ids if isinstance(i, str) and i):
            image = image_name(instance_id, self.config.namespace, self.config.image_tag)
            try:
                self.client.images.get(image)
                self.client.containers.run(image, ["command -v claude"], entrypoint=["sh", "-c"], remove=True,
                                           network_mode="none", labels={LABEL: self.run_id})
            except docker.errors.ImageNotFound:
                continue                       # that instance fails on its own; look at the next
            except docker.errors.ContainerError:
                raise CollectError(f"no Claude Code CLI: none on this machine and none in {image}; "
                                   f"{self.spec.missing_hint}") from None
            except docker.errors.APIError:
                continue
            return

    def rollout_path(self, instance_id: str, sample: int = 0) -> Path:
        """DIR/<instance_id>[.s<k>]/rollout.jsonl, in a folder cleared of an earlier run's files."""
        folder = self.config.out / rollout_folder(instance_id, sample)
        for name in OUTPUTS:
            target = folder / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        return folder / ROLLOUT_FILE

    def header(self, base: RolloutHeader) -> ClaudeRolloutHeader:
        fields = {**base.model_dump(), "agent_version": self.spec.agent_version, "tools": []}
        urls = {name: self.config.student_url for name in self.models}
        if self.options.small_url:
            urls[self.options.small_model] = self.options.small_url
        return ClaudeRolloutHeader(**fields, cli_version=self.spec.cli.version, models=self.models, urls=urls,
                                   cli_source="copied" if self.binary else "image")

    def drive(self, runtime: Runtime, row: dict[str, Any], stop: threading.Event,
              sample: int = 0) -> AgentResult:
        """One session, start to end; its files are copied out whatever happened (unless interrupted).
        The sample's seed (--seed) goes with each of its requests."""
        folder = self.config.out / rollout_folder(row["instance_id"], sample)
        key = f"{row['instance_id']}.{secrets.token_hex(4)}"
        seed = self.config.seed_of(row["instance_id"], sample)
        url = self.proxy.route(key, folder / PROXY_FILE, {"seed": seed} if seed is not None else None)
        exit_code: int | None = None
        try:
            claude = self._prepare(runtime, row["problem_statement"])
            exit_code = self._run(runtime, claude, url, stop)
        except Interrupted:
            return AgentResult(exit_status="interrupted", error="interrupted")
        except (RuntimeFailure, OSError, ValueError) as exc:
            return AgentResult(exit_status="runtime_error", error=str(exc)[:500])
        finally:
            records = self.proxy.unroute(key)
        try:
            stream, _ = runtime.container.get_archive(WORK)
            extract_work(stream, folder)
        except Exception as exc:  # the engine's errors: without the session files there is nothing to keep
            return AgentResult(exit_status="runtime_error", error=f"cannot copy the session out: {exc}"[:500])
        result = parse_result(read_head(folder / RESULT))
        stderr = read_head(folder / STDERR, 20_000).decode("utf-8", errors="replace")
        overflow = bool(records and records.last_error_kind == "context_overflow")
        status, error = session_outcome(exit_code, result, stderr, records.last_error if records else None,
                                        overflow)
        counts = records.counts if records else {}
        return AgentResult(exit_status=status, turns=counts.get("main", 0),
                           turns_with_token_ids=counts.get("main_with_token_ids", 0), error=error)

    def _prepare(self, runtime: Runtime, problem_statement: str) -> str:
        """The work folder, the prompt and the binary in place; the command that runs the CLI."""
        made = runtime.run(f"mkdir -p {WORK} {BIN_DIR}")
        if made.exit_code != 0:
            raise RuntimeFailure(f"cannot create {WORK}: {made.output.strip()[:300]}")
        runtime.write_file(f"{WORK}/{PROMPT}", self.spec.prompt(problem_statement).encode())
        if self.binary is not None:
            install_binary(runtime.container, self.binary)
            return COPIED_BINARY
        found = runtime.run("command -v claude")
        if found.exit_code != 0 or not found.output.strip():
            raise RuntimeFailure(f"the image has no `claude`; {self.spec.missing_hint}")
        return found.output.strip().splitlines()[0]

    def _run(self, runtime: Runtime, claude: str, url: str, stop: threading.Event) -> int | None:
        # the proxy's backend tries up to 3 times (a refused connection, 429, 5xx), each up to request_timeout
        env = session_env(self.spec.env, url, self.options.model, self.options.small_model,
                          self.config.max_tokens, wait_s=3 * self.config.request_timeout + 60)
        argv = session_argv(claude, self.config.max_turns, self.options.timeout)
        api = self.exec_client.api
        try:
            exec_id = api.exec_create(runtime.container.id, argv, workdir="/testbed", environment=env)["Id"]
            api.exec_start(exec_id)
            exit_code = api.exec_inspect(exec_id).get("ExitCode")
        except Exception as exc:  # the engine's errors, or the container removed under us
            if stop.is_set() or runtime.tracker.closed:
                raise Interrupted() from None
            raise RuntimeFailure(f"claude failed in the container: {exc}") from None
        if stop.is_set() or runtime.tracker.closed:
            raise Interrupted()
        return exit_code
