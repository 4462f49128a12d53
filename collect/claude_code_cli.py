"""The Claude Code CLI binary: the pinned release, where it is cached, how to fetch it.

The pin lives in configs/claude_code_cli.toml. The binary is the native build npm publishes as
`@anthropic-ai/claude-code-linux-x64`; it needs only glibc, so it runs in any SWE-bench image.
Nothing is ever downloaded inside a container: collect.run copies this binary in (or uses one
baked into the image). To fetch it once, on a machine with npm:

    python -m collect.claude_code_cli fetch      # prints the path of the unpacked binary

It lands in ~/.cache/teacher-replay/claude-code/<version>/claude ($REPLAY_CLAUDE_CODE_CACHE moves it),
where collect.run finds it without a flag.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from pydantic import Field

from collect.config import CollectError
from configs import config_path
from ingestion.schema import StrictModel

CACHE_ENV = "REPLAY_CLAUDE_CODE_CACHE"
BINARY_ENV = "REPLAY_CLAUDE_BINARY"
BINARY_IN_PACKAGE = "package/claude"


class CliPin(StrictModel):
    package: str
    version: str
    integrity: str                      # npm's dist.integrity: "sha512-<base64>"


class ClaudeCodeSpec(StrictModel):
    """configs/claude_code_cli.toml."""

    agent_version: int
    cli: CliPin
    run: dict[str, str]
    env: dict[str, str] = Field(default_factory=dict)

    def prompt(self, problem_statement: str) -> str:
        """The task as given to `claude -p`.

        >>> load_claude_code_spec().prompt("x {y}").count("x {y}")
        1
        """
        return self.run["prompt"].format(problem_statement=problem_statement)

    @property
    def missing_hint(self) -> str:
        """How a user provides the binary; every 'no CLI' error ends with it."""
        return (f"pass --claude-binary PATH (the native binary of {self.cli.package}@{self.cli.version}; "
                "`python -m collect.claude_code_cli fetch` downloads it with npm)")


@cache
def load_claude_code_spec() -> ClaudeCodeSpec:
    text = config_path("claude_code_cli.toml").read_text(encoding="utf-8")
    return ClaudeCodeSpec.model_validate(tomllib.loads(text))


def cache_dir() -> Path:
    """Where fetched binaries live, one folder per version (outside any checkout: it is 380 MB)."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "teacher-replay" / "claude-code"


def cached_binary(spec: ClaudeCodeSpec) -> Path:
    return cache_dir() / spec.cli.version / "claude"


def find_binary(explicit: Path | None, spec: ClaudeCodeSpec) -> Path | None:
    """The host binary to copy into containers: the flag, $REPLAY_CLAUDE_BINARY, then the cache.

    None means "use the `claude` baked into the image". A path that was asked for but is not a file is
    the user's mistake and a one-line CollectError.
    """
    for source, value in (("--claude-binary", explicit), (BINARY_ENV, os.environ.get(BINARY_ENV))):
        if value:
            path = Path(value).expanduser()
            if not path.is_file():
                raise CollectError(f"{source} {path}: no such file; {spec.missing_hint}")
            if not os.access(path, os.R_OK):
                raise CollectError(f"{source} {path}: not readable")
            return path
    cached = cached_binary(spec)
    return cached if cached.is_file() else None


def ensure_binary(explicit: Path | None, spec: ClaudeCodeSpec) -> tuple[Path | None, str | None]:
    """On a Ray node: `find_binary`, else the pinned release fetched into this node's cache (once per node:
    concurrent tasks wait on a lock); (the binary or None, why none could be fetched).

    None falls back to the image's own `claude`, as a local run does without a cached binary.
    """
    found = find_binary(explicit, spec)
    if found is not None or explicit is not None:
        return found, None
    cache_dir().mkdir(parents=True, exist_ok=True)
    with (cache_dir() / f".{spec.cli.version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)    # released when the file closes, also when the task dies
        try:
            return fetch_binary(spec), None
        except (CollectError, OSError, subprocess.SubprocessError, tarfile.TarError, KeyError) as exc:
            return None, str(exc).splitlines()[0] if str(exc) else repr(exc)


def integrity_of(path: Path) -> str:
    """npm's integrity string (sha512, base64) of a file.

    >>> import tempfile; f = tempfile.NamedTemporaryFile(); integrity_of(Path(f.name))[:20]
    'sha512-z4PhNX7vuL3xV'
    """
    digest = hashlib.sha512()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return "sha512-" + base64.b64encode(digest.digest()).decode()


def fetch_binary(spec: ClaudeCodeSpec, npm: str = "npm") -> Path:
    """`npm pack` the pinned release, check its integrity, unpack the binary into the cache; its path."""
    target = cached_binary(spec)
    if target.is_file():
        return target
    if shutil.which(npm) is None:
        raise CollectError(f"npm is not installed: cannot fetch {spec.cli.package}; {spec.missing_hint}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        done = subprocess.run([npm, "pack", f"{spec.cli.package}@{spec.cli.version}", "--silent",
                               "--pack-destination", work], capture_output=True, text=True, timeout=600)
        tarballs = list(Path(work).glob("*.tgz"))
        if done.returncode != 0 or len(tarballs) != 1:
            why = (done.stderr.strip().splitlines() or ["no tarball"])[-1]
            raise CollectError(f"npm pack {spec.cli.package}@{spec.cli.version} failed: {why}")
        if integrity_of(tarballs[0]) != spec.cli.integrity:
            raise CollectError(f"{tarballs[0].name}: integrity does not match configs/claude_code_cli.toml")
        with tarfile.open(tarballs[0]) as tar:
            member = tar.getmember(BINARY_IN_PACKAGE)
            source = tar.extractfile(member)
            if source is None:
                raise CollectError(f"{tarballs[0].name}: {BINARY_IN_PACKAGE} is not a file")
            partial = Path(work, "claude")
            with source, partial.open("wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)
        partial.chmod(0o755)
        os.replace(partial, target)        # atomic: a concurrent reader never sees half a binary
    return target


def tar_stream(path: Path, name: str, chunk: int = 1 << 20) -> Iterator[bytes]:
    """A one-file tar archive, streamed: docker's put_archive takes it without 380 MB in memory.

    >>> import io, tempfile; f = tempfile.NamedTemporaryFile(); _ = f.write(b"hi"); f.flush()
    >>> tarfile.open(fileobj=io.BytesIO(b"".join(tar_stream(Path(f.name), "x")))).extractfile("x").read()
    b'hi'
    """
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = path.stat().st_size, 0o755, int(path.stat().st_mtime)
    yield info.tobuf(format=tarfile.GNU_FORMAT)
    with path.open("rb") as handle:
        while data := handle.read(chunk):
            yield data
    yield b"\0" * ((-info.size) % tarfile.BLOCKSIZE) + b"\0" * (2 * tarfile.BLOCKSIZE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m collect.claude_code_cli",
                                     description="The pinned Claude Code CLI binary for collect.run.")
    parser.add_argument("action", choices=["fetch", "path"],
                        help="fetch: download it with npm (if not cached); path: print where it is cached")
    args = parser.parse_args(argv)
    spec = load_claude_code_spec()
    try:
        path = fetch_binary(spec) if args.action == "fetch" else cached_binary(spec)
    except (CollectError, OSError, subprocess.SubprocessError, tarfile.TarError, KeyError) as exc:
        print(f"collect.claude_code_cli: error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
