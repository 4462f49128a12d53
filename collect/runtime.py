"""An instance container through the docker SDK: start, run commands in /testbed, read/write files, remove.

Every container carries the run's label and is registered with a ContainerTracker, so an interrupt
can remove all of them at once, whatever the worker threads are doing.
"""

from __future__ import annotations

import io
import logging
import posixpath
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from collect.config import CollectConfig, CollectError

log = logging.getLogger("collect")
LABEL = "teacher-replay.collect"               # value: the run id
LABEL_INSTANCE = "teacher-replay.collect.instance"
WORKDIR = "/testbed"
MAX_FILE_BYTES = 8 * 1024 * 1024               # the edit tool reads whole files; no source file is bigger
MAX_PATCH_BYTES = 64 * 1024 * 1024
TIMEOUT_EXIT_CODES = (124, 137)                # GNU timeout: TERM sent / KILL after the grace period


class ImageMissing(Exception):
    pass


class RuntimeFailure(Exception):
    """The container or the engine failed (not the command: a failing command is an observation)."""


class Interrupted(Exception):
    pass


@dataclass
class CommandResult:
    output: str
    exit_code: int | None
    timed_out: bool
    truncated: bool


def docker_client(config: CollectConfig) -> Any:
    """A client whose socket timeout outlasts the longest command, or a one-line CollectError; its exec
    output is read whole (`_buffered_client`), the harness's included (it execs through this client)."""
    try:
        client = _buffered_client().from_env(timeout=max(config.command_timeout, config.eval_timeout) + 60,
                                             max_pool_size=4 * config.workers + 4)
        client.ping()
    except Exception as exc:  # docker raises DockerException, requests' errors or OSError here
        raise CollectError(f"cannot reach the docker engine: {exc}") from exc
    return client


def read_frames(reader: Any, tty: bool) -> Iterator[tuple[int, bytes]]:
    """An exec's output as docker's attach stream carries it: (stream, data) per frame (8-byte header:
    the stream, 3 zero bytes, the size, big-endian), or raw chunks under a tty (stdout's: 1); read from
    `reader` to EOF.

    >>> import io
    >>> list(read_frames(io.BufferedReader(io.BytesIO(b"\\1\\0\\0\\0\\0\\0\\0\\3ok\\n")), tty=False))
    [(1, b'ok\\n')]
    """
    while True:
        if tty:
            data = reader.read1(4096)
            if not data:
                return
            yield 1, data
            continue
        header = reader.read(8)
        if len(header) < 8:
            return
        size = int.from_bytes(header[4:], "big")
        data = reader.read(size)
        if len(data) < size:
            return
        yield header[0], data


@cache
def _buffered_client() -> Any:
    """docker.DockerClient whose exec streams are read through the HTTP response's own buffered reader.

    docker-py (7.x) reads an exec's output from the raw socket under that reader (`_get_raw_response_
    socket`), so whatever the reader took in with the response's headers is lost: a command that answers
    before the client reads its response (a loaded machine) comes back empty with its exit code 0 — a
    grep that found its lines, a patch that `git diff` printed. Reading through the reader keeps it."""
    import docker
    from docker.utils.socket import consume_socket_output, demux_adaptor

    class APIClient(docker.APIClient):
        def _read_from_socket(self, response: Any, stream: bool, tty: bool = True,
                              demux: bool = False) -> Any:
            reader = getattr(getattr(getattr(response, "raw", None), "_fp", None), "fp", None)
            if reader is None or not self.base_url.startswith(("http+docker://localhost", "http://",
                                                                   "https://")):
                return super()._read_from_socket(response, stream, tty, demux)
            self._raise_for_status(response)
            frames = read_frames(reader, tty)
            gen = (demux_adaptor(*frame) for frame in frames) if demux else (data for _, data in frames)
            if stream:
                return gen
            try:
                return consume_socket_output(gen, demux=demux)
            finally:
                response.close()

    class DockerClient(docker.DockerClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.api = APIClient(*args, **kwargs)

    return DockerClient


def ensure_image(client: Any, image: str, pull: bool) -> None:
    import docker

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        if not pull:
            raise ImageMissing(f"image {image} is not present locally (build it, or pass --pull)") from None
        try:
            client.images.pull(image)
        except docker.errors.APIError as exc:
            raise ImageMissing(f"image {image} could not be pulled: {exc.explanation or exc}") from None
    except docker.errors.APIError as exc:      # e.g. "invalid reference format" from a bad --namespace
        raise ImageMissing(f"image {image}: {exc.explanation or exc}") from None


def clip(head: bytes, tail: bytes, total: int) -> tuple[str, bool]:
    """Decode a command's kept head and tail, with a marker saying how much was cut.

    >>> clip(b"ab", b"yz", 10)
    ('ab\\n[... 6 bytes cut ...]\\nyz', True)
    >>> clip(b"abc", b"", 3)
    ('abc', False)
    """
    if total <= len(head) + len(tail):
        return (head + tail).decode("utf-8", errors="replace"), False
    cut = total - len(head) - len(tail)
    text = head.decode("utf-8", errors="replace") + f"\n[... {cut} bytes cut ...]\n"
    return text + tail.decode("utf-8", errors="replace"), True


class ContainerTracker:
    """Every live container of a run; `close()` removes them all and refuses new ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[str, Any] = {}
        self.closed = False

    def add(self, container: Any) -> None:
        with self._lock:
            if not self.closed:
                self._live[container.id] = container
                return
        _remove(container)                 # created while the run was being interrupted
        raise Interrupted()

    def discard(self, container: Any) -> None:
        with self._lock:
            self._live.pop(container.id, None)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            live, self._live = list(self._live.values()), {}
        for container in live:
            try:
                _remove(container)
            except Exception as exc:  # keep removing the others; the run's final sweep tries again
                log.warning("could not remove container %s: %s", container.id[:12], exc)


def containers(client: Any, filters: dict[str, Any] | None = None, *, running: bool = False) -> list[Any]:
    """The engine's containers matching `filters` (all of them, or only the running ones). docker-py lists,
    then inspects each one: a container another process removes in between raised NotFound, which a
    sweep or a poll beside a live run must take as "gone", not fail on."""
    return client.containers.list(all=not running, filters=filters or {}, ignore_removed=True)


def remove_container(container: Any) -> None:
    """Force-remove one container (and its anonymous volumes); one already gone is fine."""
    _remove(container)


def _remove(container: Any) -> None:
    import docker

    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise


def sweep(client: Any, run_id: str) -> int:
    """Remove whatever this run left: its labelled containers and the harness's (named after the run)."""
    import docker

    try:
        found = {c.id: c for c in containers(client, {"label": f"{LABEL}={run_id}"})}
        found.update({c.id: c for c in containers(client, {"name": run_id})})
        for container in found.values():
            _remove(container)
    except (docker.errors.DockerException, OSError) as exc:   # the report must still be written
        log.warning("could not remove the containers of run %s: %s", run_id, exc)
        return 0
    return len(found)


class Runtime:
    """One started container; the agent's tools call `run`, `read_file` and `write_file`."""

    def __init__(self, client: Any, config: CollectConfig, tracker: ContainerTracker) -> None:
        self.client = client
        self.config = config
        self.tracker = tracker
        self.container: Any = None

    def start(self, image: str, run_id: str, instance_id: str, network: str = "none",
              labels: dict[str, str] | None = None, attempt: str = "") -> Runtime:
        """Create and start the container; `network` is "none" unless an agent needs its proxy.

        `labels`: the run's others (its output folder, the Ray node), for sweeps after a lost node;
        `attempt` tells apart the containers of one rollout run again (on Ray, after a lost node).
        """
        import docker

        try:
            # create + start, not run(): containers.run pulls a missing image, and we never pull unasked
            self.container = self.client.containers.create(
                image, command=["tail", "-f", "/dev/null"], detach=True, init=True,
                name=f"{run_id}.{instance_id}{attempt}",
                labels={**(labels or {}), LABEL: run_id, LABEL_INSTANCE: instance_id},
                working_dir=WORKDIR, network_mode=network, mem_limit=self.config.mem_limit,
                nano_cpus=int(self.config.cpus * 1e9), pids_limit=self.config.pids_limit)
        except docker.errors.ImageNotFound as exc:
            raise ImageMissing(str(exc)) from None
        except docker.errors.APIError as exc:
            why = exc.explanation or exc
            raise RuntimeFailure(f"cannot create a container from {image}: {why}") from None
        self.tracker.add(self.container)
        try:
            self.container.start()
        except docker.errors.APIError as exc:
            self.remove()
            raise RuntimeFailure(f"cannot start a container from {image}: {exc.explanation or exc}") from None
        return self

    def remove(self) -> None:
        if self.container is not None:
            self.tracker.discard(self.container)
            _remove(self.container)
            self.container = None

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def run(self, command: str, timeout: int | None = None) -> CommandResult:
        """Run `bash -lc command` in /testbed, killed after `timeout` s, output clipped to the limit."""
        timeout = timeout or self.config.command_timeout
        # GNU timeout signals its whole process group, so background jobs of the command die with it
        argv = ["timeout", "-k", "5", str(timeout), "bash", "-lc", command]
        started = time.monotonic()
        result = self._exec(argv, self.config.output_limit)
        result.timed_out = result.exit_code in TIMEOUT_EXIT_CODES and time.monotonic() - started >= timeout
        return result

    def exec_argv(self, argv: list[str], timeout: int) -> CommandResult:
        """A command of the run's own (not the agent's), killed after `timeout` s."""
        return self._exec(["timeout", "-k", "5", str(timeout), *argv], self.config.output_limit)

    def _exec(self, argv: list[str], limit: int, stderr: bool = True) -> CommandResult:
        """One exec, streamed: only `limit` bytes (head and tail) are ever held, whatever it prints."""
        api = self.client.api
        try:
            exec_id = api.exec_create(self.container.id, argv, workdir=WORKDIR, stderr=stderr)["Id"]
            head, tail, total = bytearray(), bytearray(), 0
            for chunk in api.exec_start(exec_id, stream=True):
                total += len(chunk)
                room = max(limit // 2 - len(head), 0)
                head += chunk[:room]
                tail += chunk[room:]
                if len(tail) > limit:
                    del tail[:len(tail) - limit // 2]
            exit_code = api.exec_inspect(exec_id).get("ExitCode")
            if self.tracker.closed:        # killed by the interrupt's removal: not the command's doing
                raise Interrupted()
        except Interrupted:
            raise
        except Exception as exc:  # the engine's errors, requests' timeouts, a container removed under us
            if self.tracker.closed:
                raise Interrupted() from None
            raise RuntimeFailure(f"command failed in the container: {exc}") from None
        output, truncated = clip(bytes(head), bytes(tail[-(limit - len(head)):]) if tail else b"", total)
        return CommandResult(output, exit_code, False, truncated)

    def absolute(self, path: str) -> str:
        """A tool's path, relative ones taken from /testbed."""
        return posixpath.normpath(posixpath.join(WORKDIR, path))

    def read_file(self, path: str) -> tuple[bytes, tarfile.TarInfo]:
        import docker

        try:
            stream, stat = self.container.get_archive(self.absolute(path))
        except docker.errors.NotFound:
            raise FileNotFoundError(path) from None
        if stat.get("size", 0) > MAX_FILE_BYTES:
            raise ValueError(f"{path} is larger than {MAX_FILE_BYTES} bytes")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            info = tar.next()
            if info is None or not info.isfile():
                raise ValueError(f"{path} is not a regular file")
            data = tar.extractfile(info).read()  # type: ignore[union-attr]
        return data, info

    def write_file(self, path: str, data: bytes, like: tarfile.TarInfo | None = None) -> None:
        """Write a file, keeping the mode and owner of the one it replaces."""
        target = self.absolute(path)
        parent, name = posixpath.split(target)
        info = tarfile.TarInfo(name)
        if like is not None:
            info.mode, info.uid, info.gid = like.mode, like.uid, like.gid
        else:
            info.mode = 0o644
        info.size, info.mtime = len(data), int(time.time())
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.addfile(info, io.BytesIO(data))
        made = self._exec(["mkdir", "-p", "--", parent], limit=2000)
        if made.exit_code != 0:
            raise ValueError(f"cannot create directory {parent}: {made.output.strip()}")
        if not self.container.put_archive(parent, buffer.getvalue()):
            raise ValueError(f"cannot write {target}")

    def diff(self) -> str:
        """The patch: every change under /testbed against HEAD, new files included (binary-safe)."""
        added = self._exec(["git", "-c", "core.fileMode=false", "add", "-A"], limit=4000)
        if added.exit_code != 0:
            raise RuntimeFailure(f"git add failed (exit {added.exit_code}): {added.output[-500:]}")
        # stdout only: a warning on stderr must not end up inside the patch
        diff = self._exec(["git", "-c", "core.fileMode=false", "diff", "--cached", "--binary"],
                          limit=MAX_PATCH_BYTES, stderr=False)
        if diff.exit_code != 0 or diff.truncated:
            raise RuntimeFailure(f"git diff failed (exit {diff.exit_code}, {len(diff.output)} characters)")
        return diff.output
