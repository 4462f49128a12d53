"""Shared fixtures: real sessions from ../shared, an isolated cache/home for every test.

../shared (the workspace's read-only fixtures) sits beside this checkout in the project's workspace and
CI, not in a plain clone: the tests that need it skip there, naming the folder they looked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
FIXTURES = SHARED / "fixtures" / "claude_code" / "projects"
SWEBENCH_SAMPLES = SHARED / "fixtures" / "swebench" / "swebench_samples.jsonl"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("REPLAY_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def _contained(request: pytest.FixtureRequest) -> Any:
    """After a docker test that failed: stop the runs it started and remove what they left on the engine.
    Every docker test asserts the engine holds nothing of its own when it ends; a failed one (its driver
    still running, its containers still up) would otherwise fail every test after it in the session."""
    yield
    if request.node.get_closest_marker("docker") and request.node.stash.get(_FAILED, False):
        _stop_runs()
        _remove_stale(request.getfixturevalue("client"), "by the failed test")


def _stop_runs() -> None:
    """Kill this session's child processes running one of the project's commands (and their children)."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            argv = child.cmdline()
        except psutil.Error:
            continue
        module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
        if module.startswith(("collect.", "replay.")):
            for process in [*child.children(recursive=True), child]:
                try:
                    process.kill()
                except psutil.Error:
                    pass


@pytest.fixture(scope="session")
def client() -> Any:
    """The docker engine, for tests marked `docker` (.ci/docker.sh starts one)."""
    import docker

    try:
        engine = docker.from_env()
        engine.ping()
    except Exception as exc:
        pytest.fail(f"no docker engine ({exc}); run .ci/docker.sh first")
    _remove_stale(engine)
    return engine


def _remove_stale(engine: Any, by: str = "by an earlier test session") -> None:
    """Remove what an earlier, killed test session (or a failed test) left on the engine (its containers
    survive a restart of dockerd): every docker test asserts its run left nothing behind, and would fail on
    those instead. (Two test sessions on one engine at once never worked: each would see the other's.)"""
    from collect.runtime import LABEL, containers, remove_container

    stale = {c.id: c for c in containers(engine, {"label": LABEL})}
    stale.update({c.id: c for c in containers(engine) if c.name.startswith("sweb.eval.toy")})
    for container in stale.values():
        remove_container(container)   # one a killed run's own sweep removes meanwhile is fine
    networks = engine.networks.list(filters={"label": LABEL})
    for network in networks:
        network.remove()
    if stale or networks:
        print(f"removed {len(stale)} containers and {len(networks)} networks left {by}")


def shared(path: Path) -> Path:
    """`path` under ../shared, or skip the test saying which folder is missing."""
    if not path.exists():
        pytest.skip(f"needs the shared fixtures: {path} not found (../shared beside the checkout)")
    return path


@pytest.fixture(scope="session")
def fixtures_root() -> Path:
    return shared(FIXTURES)


@pytest.fixture(scope="session")
def swebench_samples() -> Path:
    return shared(SWEBENCH_SAMPLES)
