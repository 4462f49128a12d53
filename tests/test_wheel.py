"""The package as a user installs it (issue #34): the wheel built from this tree, installed into a fresh
virtualenv with nothing of the checkout on its path, run from another folder. Editable installs (`make`,
CI) hide what a wheel leaves out: a stale hand-made package list once dropped `ingestion.codex`.

Each source format's test fixtures are dry-run twice, by the checkout's `python -m replay.run` and by the
installed one, on the same absolute paths: states.jsonl and traces.jsonl must be the same bytes (the
states carry their source paths, so only the output folder differs, and it is in neither file).

Nothing is downloaded: the wheel is built with `--no-build-isolation --no-index` by this venv's
setuptools, installed with `--no-deps --no-index`, and the fresh venv finds the dependencies through a
`.pth` line naming this venv's site-packages (a line, not a site dir: that folder's own `.pth` files,
the checkout's editable finder among them, are not run there; test_nothing_of_the_checkout_is_imported
checks it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, shared

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("replay", "ingestion", "teachers", "consensus", "collect", "configs")
DATA = ROOT / "tests" / "data"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    return {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONNOUSERSITE": "1", "PIP_NO_INPUT": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "NO_COLOR": "1", **extra}


def _call(args: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=_env(**extra), capture_output=True, text=True, timeout=600)


def package_files() -> set[str]:
    """The files of the six packages in this tree, as wheel paths: git's view (tracked, or new and not
    ignored), else every file but caches."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z", "--", *PACKAGES],
                            cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout:
        names = {n for n in listed.stdout.split("\0") if n and (ROOT / n).is_file()}
    else:
        names = {p.relative_to(ROOT).as_posix() for top in PACKAGES for p in (ROOT / top).rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts}
    return {n for n in names if not n.endswith((".pyc", ".pyo"))}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the tree, so no build/ folder of an earlier build (which setuptools would
    ship again) and nothing written into the checkout."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", *package_files()):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    built = _call([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                   "--no-index", "-w", str(dist), str(src)], cwd=dist)
    assert built.returncode == 0, built.stderr
    (path,) = dist.glob("teacher_replay-*.whl")
    return path


def _dependencies() -> list[str]:
    """This venv's site-packages (it may sit inside the checkout, as .venv does)."""
    return list(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))


@pytest.fixture(scope="module")
def python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fresh virtualenv's interpreter, the wheel installed, this venv's packages under it."""
    home = tmp_path_factory.mktemp("fresh")
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, env=_env()).stdout.strip()
    Path(site, "teacher_replay_deps.pth").write_text("".join(f"{d}\n" for d in _dependencies()))
    installed = _call([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                       "--no-index", str(wheel)], cwd=home)
    assert installed.returncode == 0, installed.stderr
    return python


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the installed package runs from: neither the checkout nor above it."""
    return tmp_path_factory.mktemp("elsewhere")


def test_the_wheel_holds_every_file_of_the_packages_and_nothing_else(wheel: Path) -> None:
    names = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
    tree = package_files()
    assert not tree - names, f"left out of the wheel (add their pattern to package-data): {tree - names}"
    assert not names - tree, f"in the wheel but not in the tree: {names - tree}"
    assert {n.split("/")[0] for n in names} == set(PACKAGES)
    assert {"ingestion/codex/__init__.py", "ingestion/trajectories/__init__.py",
            "replay/view/assets/view.css", "configs/chat_templates/qwen3.jinja"} <= names


def test_nothing_of_the_checkout_is_imported(python: Path, elsewhere: Path) -> None:
    probe = ("import importlib, json, sys\n"
             f"names = {[*PACKAGES, 'ingestion.codex', 'ingestion.trajectories', 'replay.view']!r}\n"
             "files = {n: importlib.import_module(n).__file__ for n in names}\n"
             "finders = [type(f).__module__ for f in sys.meta_path]\n"
             "print(json.dumps({'files': files, 'path': sys.path, 'finders': finders,\n"
             "                  'prefix': sys.prefix}))")
    done = _call([str(python), "-c", probe], cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert Path(seen["prefix"]) == python.parent.parent
    for name, file in seen["files"].items():
        assert Path(file).is_relative_to(python.parent.parent), (name, file)
    inside = [p for p in seen["path"] if p and Path(p).resolve().is_relative_to(ROOT)]
    assert {Path(p).resolve() for p in inside} <= {Path(d).resolve() for d in _dependencies()}
    assert not [f for f in seen["finders"] if "editable" in f]


def _copy(folder: Path) -> Callable[[Path], Path]:
    return lambda _tmp: folder


def _copilot(tmp: Path) -> Path:
    from tests.test_agents_ingest import copilot_events

    copilot_events(tmp / "session-state" / "cp-1" / "events.jsonl")
    return tmp


def _mini_swe_agent(tmp: Path) -> Path:
    from tests.test_agents_traj import MINI_TEXT, MINI_TOOLS

    shutil.copytree(DATA / "trajectories" / "mini_swe_agent", tmp / "made")
    (tmp / "text.traj.json").write_text(json.dumps(MINI_TEXT, indent=2))
    (tmp / "tools.traj.json").write_text(json.dumps(MINI_TOOLS))
    return tmp


def _atif(tmp: Path) -> Path:
    from tests.test_agents_traj import atif_trajectories

    atif_trajectories(tmp)
    return tmp


def _trajectory_datasets(tmp: Path) -> Path:
    from datasets import Dataset

    from tests.test_agents_traj import _rows

    Dataset.from_list(_rows()).save_to_disk(str(tmp / "saved"))
    Dataset.from_list(_rows()).to_parquet(str(tmp / "rows.parquet"))
    (tmp / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    return tmp


def _rollouts(tmp: Path) -> Path:
    from tests.test_rollouts import FINAL, write

    write(tmp / "toy__calc-1.rollout.jsonl", FINAL)
    return tmp


def _claude_code_rollouts(tmp: Path) -> Path:
    from tests.test_claude_code_agent import write_rollout

    write_rollout(tmp / "toy__calc-1")
    return tmp


# Each format's fixtures (those of tests/test_agents_*.py, test_rollouts.py, test_claude_code_agent.py)
# and the formats report.json must name for them.
SOURCES: dict[str, tuple[Callable[[Path], Path], set[str]]] = {
    "claude_code": (lambda _tmp: shared(FIXTURES), {"claude_code"}),
    "claude_code_examples": (_copy(ROOT / "examples" / "sessions"), {"claude_code"}),
    "codex": (_copy(DATA / "agents" / "codex"), {"codex"}),
    "gemini": (_copy(DATA / "agents" / "gemini"), {"gemini"}),
    "copilot": (_copilot, {"copilot"}),
    "mini_swe_agent": (_mini_swe_agent, {"mini_swe_agent"}),
    "swe_agent": (_copy(DATA / "trajectories" / "swe_agent"), {"swe_agent"}),
    "openhands": (_copy(DATA / "trajectories" / "openhands"), {"openhands"}),
    "atif": (_atif, {"atif"}),
    "trajectory_dataset": (_trajectory_datasets, {"trajectory_dataset"}),
    "swebench_rollout": (_rollouts, {"swebench_rollout"}),
    "claude_code_rollout": (_claude_code_rollouts, {"swebench_rollout"}),
    # agent-lightning (tests/agl_fixtures.py made them with the real packages): 0.3's span streams and an
    # export of 1.0's Gateway; the live Gateway is read from the wheel below.
    "agl_spans": (_copy(DATA / "agent_lightning" / "seed"), {"agl_spans"}),
    "agl_gateway": (_copy(DATA / "agent_lightning" / "gateway"), {"agl_gateway"}),
}


def _dry_run(python: Path, cwd: Path, source: Path | str, out: Path, *extra: str) -> subprocess.Popen[str]:
    args = [str(python), "-m", "replay.run", "--source", str(source), "--out", str(out), "--dry-run", *extra]
    return subprocess.Popen(args, cwd=cwd, env=_env(REPLAY_CACHE=str(out.parent / f"{out.name}.sqlite")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _report(run: subprocess.Popen[str], out: Path) -> dict:
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr
    assert "Traceback" not in stderr + stdout
    return json.loads((out / "report.json").read_text())


@pytest.mark.parametrize("name", SOURCES)
def test_each_format_dry_runs_from_the_wheel_as_from_the_checkout(
        name: str, python: Path, elsewhere: Path, tmp_path: Path) -> None:
    make, formats = SOURCES[name]
    (tmp_path / "source").mkdir()
    source = make(tmp_path / "source")
    # Side by side: the two runs share nothing but their input.
    runs = {"wheel": _dry_run(python, elsewhere, source, tmp_path / "wheel"),
            "checkout": _dry_run(Path(sys.executable), ROOT, source, tmp_path / "checkout")}
    installed, checkout = (_report(run, tmp_path / where) for where, run in runs.items())
    assert set(installed["formats"]) == formats and installed["states"] > 0
    assert installed["formats"] == checkout["formats"] and installed["states"] == checkout["states"]
    for output in ("states.jsonl", "traces.jsonl"):
        assert (tmp_path / "wheel" / output).read_bytes() == (tmp_path / "checkout" / output).read_bytes()


def test_a_live_agent_lightning_gateway_dry_runs_from_the_wheel(python: Path, elsewhere: Path,
                                                                tmp_path: Path) -> None:
    """`--source agl+http://…`: the real 1.0.2 Gateway (tests/agl_venvs.py), read by both installs."""
    from tests.agl_rollouts import gateway, gateway_rollouts
    from tests.agl_venvs import Unavailable, python_of

    try:
        agl = python_of("1.0.2")
    except Unavailable as why:
        pytest.skip(f"agentlightning 1.0.2 cannot be installed here: {why}")
    with gateway(agl) as url:
        gateway_rollouts(url, tmp_path / "agent")
        runs = {"wheel": _dry_run(python, elsewhere, f"agl+{url}", tmp_path / "wheel"),
                "checkout": _dry_run(Path(sys.executable), ROOT, f"agl+{url}", tmp_path / "checkout")}
        installed, checkout = (_report(run, tmp_path / where) for where, run in runs.items())
    assert installed["formats"] == checkout["formats"] == {"agl_gateway": {"files": 1, "states": 8}}
    for output in ("states.jsonl", "traces.jsonl"):
        assert (tmp_path / "wheel" / output).read_bytes() == (tmp_path / "checkout" / output).read_bytes()


def test_the_cost_estimate_runs_from_the_wheel(python: Path, elsewhere: Path, tmp_path: Path) -> None:
    """With teachers, a dry run loads litellm (its local price map), the teachers' and the estimate's
    configs; gpt-5 is not asked about the states of OpenAI's own models."""
    codex = DATA / "agents" / "codex"
    run = _dry_run(python, elsewhere, codex, tmp_path / "out", "--teachers", "gpt-5,deepseek")
    report = _report(run, tmp_path / "out")
    estimate = report["extra"]["estimate"]
    assert estimate["deepseek"]["calls"] == report["states"] > estimate["gpt-5"]["calls"] > 0
    assert estimate["deepseek"]["cost_usd"] > 0 and estimate["gpt-5"]["cost_usd"] > 0
    assert "configs/estimate.toml" in report["extra"]["estimate_sources"]["gpt-5"]


def _entry_points() -> list[str]:
    """Every `python -m` module of the packages: a `__main__.py`, or a module with a `__main__` guard."""
    found = []
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name == "__main__.py":
                found.append(".".join(path.parent.relative_to(ROOT).parts))
            elif "if __name__ == \"__main__\":" in path.read_text(encoding="utf-8"):
                found.append(".".join(path.with_suffix("").relative_to(ROOT).parts))
    return found


@pytest.mark.parametrize("module", _entry_points())
def test_each_entry_point_answers_help_from_the_wheel(module: str, python: Path, elsewhere: Path) -> None:
    done = _call([str(python), "-m", module, "--help"], cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:") and "Traceback" not in done.stderr
