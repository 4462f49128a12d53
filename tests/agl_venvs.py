"""agent-lightning's two releases, each in its own virtualenv, made once per machine and cached.

0.3.0 (the seed example's: LightningStoreServer, LLMProxy over litellm) and 1.0.2 (the Gateway,
`agl-server`). 1.0.2 declares Python >= 3.12; it is installed with `--ignore-requires-python` and its
Gateway runs on 3.11 (tests/test_agl_gateway.py uses every route the reader needs). Neither can share
this venv: 0.3.0 pins its own litellm, 1.0.2 its own fastapi and pydantic.

The venvs live in ~/.cache/teacher-replay/agentlightning/<version>/ ($REPLAY_AGL_CACHE moves them),
outside any test's tmp_path: 0.3.0 is ~800 MB and two minutes of pip. One is built under a temporary
name and renamed when pip is done, under a lock, so parallel test workers build it once and never see a
half-made one. `python tests/agl_venvs.py` (stdlib only; .ci/run starts it in the background) builds both.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

VERSIONS = {"0.3.0": [], "1.0.2": ["--ignore-requires-python"]}
CACHE_ENV = "REPLAY_AGL_CACHE"


class Unavailable(Exception):
    """The venv could not be made (no package index, no pip): the tests that need it skip, saying why."""


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "teacher-replay" / "agentlightning"


def python_of(version: str) -> Path:
    """The interpreter of agentlightning `version`'s venv, made first if need be."""
    home = cache_root() / version
    python = home / "bin" / "python"
    if (home / ".complete").exists():
        return python
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / ".complete").exists():
            _build(version, home)
    return python


def _build(version: str, home: Path) -> None:
    building = home.with_name(f".{version}.building")
    shutil.rmtree(building, ignore_errors=True)
    venv.create(building, with_pip=True)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    done = subprocess.run([str(building / "bin" / "python"), "-m", "pip", "install", "-q",
                           *VERSIONS[version], f"agentlightning=={version}"],
                          capture_output=True, text=True, env=env, timeout=1200)
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        tail = [line for line in done.stderr.splitlines() if not line.startswith("WARNING: Location")]
        raise Unavailable(f"pip install agentlightning=={version} failed: {' / '.join(tail[-3:])}")
    # The venv's scripts name their interpreter by path: they must be made where they will stay.
    shutil.rmtree(home, ignore_errors=True)
    building.rename(home)
    for script in (home / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            text = script.read_bytes()
            if text.startswith(b"#!") and str(building).encode() in text:
                script.write_bytes(text.replace(str(building).encode(), str(home).encode()))
    (home / ".complete").write_text(version)


if __name__ == "__main__":
    for name in VERSIONS:
        try:
            print(python_of(name))
        except Unavailable as why:
            print(why, file=sys.stderr)
