"""`collect.run --agent claude-code`: the student plays Claude Code's brain inside each instance container.

Per run (`ClaudeCodeAgent.start`): the CLI binary is resolved (--claude-binary, $REPLAY_CLAUDE_BINARY,
the cache of the version pinned in configs/claude_code_cli.toml, else a `claude` baked into the
images); an internal docker network is created (no route anywhere but the host, its gateway); the
recording proxy (collect/proxy.py) listens on that gateway, in front of the student's server.
Per instance (`drive`): the container joins the network, the CLI is copied in (unless baked in), and
`claude -p` runs in /testbed with ANTHROPIC_BASE_URL = the proxy; then the CLI's files are copied out.
The patch and the reward come from collect/runner.py exactly as for the minimal agent.

What one instance leaves in DIR/<instance_id>/ (ingestion/claude_rollouts.py reads it):
  rollout.jsonl   header (agent "claude-code", CLI version, model map) and final (patch, reward)
  proxy.jsonl     one exchange per Messages request: token ids, logprobs (ingestion/rollout_format.py)
  claude/         the CLI's config dir; its session is claude/projects/-testbed/<session id>.jsonl
  prompt.md, result.json (the `--output-format json` result), stderr.txt
"""

from __future__ import annotations

import secrets
import shutil
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
from ingestion.rollout_format import RolloutHeader
from ingestion.schema import StrictModel

ROLLOUT_FILE, PROXY_FILE = "rollout.jsonl", "proxy.jsonl"
OUTPUTS = (ROLLOUT_FILE, PROXY_FILE, PROMPT, RESULT, STDERR, "claude")


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
    """Shared by the run's workers: the proxy, the network and the binary are per run."""

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
        self.proxy: Any = None
        self.exec_client: Any = None

    @property
    def network_name(self) -> str:
        return self.network.name if self.network is not None else "none"

    def start(self, rows: list[Any]) -> None:
        """Check a CLI is at hand, then the network, the proxy and a client for hour-long execs."""
        import docker

        if self.binary is None:
            self._check_images(rows)
        try:
            self._start_network_and_proxy()
        except BaseException:
            self.close()
            raise
        # `claude -p` prints nothing until it ends: the socket must outlast the session.
        self.exec_client = docker.from_env(timeout=self.options.timeout + 120)

    def _start_network_and_proxy(self) -> None:
        import docker

        from collect.proxy import AnthropicProxy, ProxyConfig, ProxyError

        try:
            self.network = self.client.networks.create(f"{self.run_id}.claude-code", driver="bridge",
                                                       internal=True, labels={LABEL: self.run_id})
            self.network.reload()
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
        if self.network is not None:
            try:
                self.network.remove()
            except Exception:  # a leftover network must not hide the run's report
                pass
        if self.exec_client is not None:
            self.exec_client.close()

    def _check_images(self, rows: list[Any]) -> None:
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

    def rollout_path(self, instance_id: str) -> Path:
        """DIR/<instance_id>/rollout.jsonl, in a folder cleared of an earlier run's files."""
        folder = self.config.out / instance_id
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

    def drive(self, runtime: Runtime, row: dict[str, Any], stop: threading.Event) -> AgentResult:
        """One session, start to end; its files are copied out whatever happened (unless interrupted)."""
        folder = self.config.out / row["instance_id"]
        key = f"{row['instance_id']}.{secrets.token_hex(4)}"
        url = self.proxy.route(key, folder / PROXY_FILE)
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
