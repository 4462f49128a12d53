"""Issue #55, item 2: `python -m replay.run --dry-run` writes the same bytes with one ingestion process and
with two (`--ingest-workers`), on every source format's fixtures, each alone and all in one folder.

Every output file is compared byte for byte, except what names the run itself: report.json without
`extra.ingest_workers`, run.json without `command`, `out` and `ingest.workers` (the command line, the
output folder and the worker count; nothing else of either differs).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replay.run import main
from tests.agl_rollouts import ROLLOUTS, run_toy_agent, stand_in
from tests.agl_rollouts import Made as AglMade
from tests.conftest import FIXTURES, SWEBENCH_SAMPLES, shared
from tests.test_agents_ingest import copilot_events
from tests.test_agents_traj import MINI_TEXT, MINI_TOOLS, _rows, atif_trajectories
from tests.test_rollouts import FINAL
from tests.test_rollouts import write as write_rollout

DATA = Path(__file__).resolve().parent / "data"
# What names the run, not what it read: the keys left out of the comparison (dotted: nested).
RUN_KEYS = {"report.json": ["extra.ingest_workers"], "run.json": ["command", "out", "ingest.workers"]}


def _copy(*parts: str) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        shutil.copytree(DATA.joinpath(*parts), folder / parts[-1])
    return make


def _claude_code(folder: Path) -> None:
    shutil.copytree(shared(FIXTURES), folder / "projects")


def _copilot(folder: Path) -> None:
    copilot_events(folder / "session-state" / "cp-1" / "events.jsonl")
    shutil.copytree(folder / "session-state" / "cp-1", folder / "session-state" / "cp-1-copy")


def _mini_swe_agent(folder: Path) -> None:
    _copy("trajectories", "mini_swe_agent")(folder)
    (folder / "a.traj.json").write_text(json.dumps(MINI_TEXT, indent=2))
    (folder / "b.traj.json").write_text(json.dumps(MINI_TOOLS))


def _datasets(folder: Path) -> None:
    from datasets import Dataset

    Dataset.from_list(_rows()).save_to_disk(str(folder / "saved"))
    Dataset.from_list(_rows()).to_parquet(str(folder / "rows.parquet"))
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))


def _swebench_rollouts(folder: Path) -> None:
    """collect/'s agent on the toy instances against the vLLM-shaped stand-in (loopback), and the
    hand-made rollout of tests/test_rollouts.py twice (one rollout id in two files)."""
    (folder / "collected").mkdir()
    (folder / "made").mkdir()
    with stand_in(AglMade()) as server:
        for instance_id, (script, _) in ROLLOUTS.items():
            run_toy_agent(server.url, "EMPTY", instance_id, script, folder / "collected")
    for name in ("a", "b"):
        write_rollout(folder / "made" / f"{name}.rollout.jsonl", FINAL if name == "a" else None)


def _unknown(folder: Path) -> None:   # SWE-bench instances are no trajectory: a counted skip
    shutil.copy(shared(SWEBENCH_SAMPLES), folder / SWEBENCH_SAMPLES.name)


FORMATS: dict[str, Callable[[Path], None]] = {
    "claude_code": _claude_code,
    "codex": _copy("agents", "codex"),
    "gemini": _copy("agents", "gemini"),
    "copilot": _copilot,
    "mini_swe_agent": _mini_swe_agent,
    "swe_agent": _copy("trajectories", "swe_agent"),
    "openhands": _copy("trajectories", "openhands"),
    "atif": lambda folder: atif_trajectories(folder / "atif") and None,
    "trajectory_dataset": _datasets,
    "swebench_rollout": _swebench_rollouts,
    "agl_spans": _copy("agent_lightning", "seed"),
    "agl_gateway": _copy("agent_lightning", "gateway"),
    "agl_anthropic": _copy("agent_lightning", "anthropic"),
    "unknown": _unknown,
}


def dry_run(source: Path, out: Path, workers: int, *extra: str) -> None:
    assert main(["--source", str(source), "--out", str(out), "--dry-run", "--ingest-workers", str(workers),
                 *extra]) == 0


def _without(value: dict[str, Any], dotted: list[str]) -> dict[str, Any]:
    value = json.loads(json.dumps(value))
    for key in dotted:
        *path, last = key.split(".")
        inner = value
        for part in path:
            inner = inner[part]
        inner.pop(last)
    return value


def assert_same_outputs(one: Path, two: Path) -> dict[str, Any]:
    """Every file of `one` and `two` the same bytes (report.json and run.json less RUN_KEYS); one's
    report."""
    names = sorted(p.relative_to(one).as_posix() for p in one.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(two).as_posix() for p in two.rglob("*") if p.is_file())
    assert {"states.jsonl", "traces.jsonl", "report.json", "run.json"} <= set(names)
    for name in names:
        first, second = (one / name).read_bytes(), (two / name).read_bytes()
        if name in RUN_KEYS:
            first_value, second_value = json.loads(first), json.loads(second)
            assert first_value != second_value   # the keys left out do tell the runs apart
            assert _without(first_value, RUN_KEYS[name]) == _without(second_value, RUN_KEYS[name]), name
        else:
            assert first == second, f"{name}: first difference at byte {_first_difference(first, second)}"
    return json.loads((one / "report.json").read_text())


def _first_difference(a: bytes, b: bytes) -> int:
    return next((n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_one_and_two_workers_write_the_same_bytes(tmp_path: Path, kind: str) -> None:
    source = tmp_path / "src"
    source.mkdir()
    FORMATS[kind](source)
    dry_run(source, tmp_path / "one", 1)
    dry_run(source, tmp_path / "two", 2)
    report = assert_same_outputs(tmp_path / "one", tmp_path / "two")
    if kind == "unknown":
        assert report["states"] == 0 and report["skipped_files"] == {"unknown_format": 1}
    else:
        assert report["states"] > 0 and kind.split("_anthropic")[0] in str(report["formats"])


def test_every_format_in_one_folder_writes_the_same_bytes(tmp_path: Path) -> None:
    # their files interleaved in one walk: which process reads which file changes with the count
    source = tmp_path / "src"
    for kind, make in FORMATS.items():
        (source / kind).mkdir(parents=True)
        make(source / kind)
    dry_run(source, tmp_path / "one", 1, "--include-subagents")
    for workers in (2, 3):
        dry_run(source, tmp_path / f"w{workers}", workers, "--include-subagents")
        report = assert_same_outputs(tmp_path / "one", tmp_path / f"w{workers}")
    assert len(report["formats"]) >= 12
