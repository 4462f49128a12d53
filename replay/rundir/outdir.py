"""`--out DIR` as one unit: a run writes into a fresh hidden folder inside DIR and swaps it in at the end.

So a failed or interrupted run leaves the previous run's files as they were (never new states beside
an old report). DIR is replay.run's when it holds a `run.json` (every run writes one); a non-empty
folder that is not is refused unless `--force`, and even then nothing in it is deleted or replaced:
only the names in `RUN_FILES` are ever replaced, and only in a folder replay.run made.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from ingestion.schema import ReplayError

# Everything a run writes at the top of DIR (replay.ablate's `ablation/` is not a run's, and is kept;
# `view/`, the pages of a run, goes with the run it shows: `--view` writes it again after the swap).
RUN_FILES = ("dataset", "pairs.jsonl", "README.md", "states.jsonl", "traces.jsonl", "proposals.jsonl",
             "verdicts.jsonl", "report.json", "run.json", "view", "selection.json", "sent.jsonl")
MARKER = "run.json"
_WORK, _OLD = ".replay-run-", ".replay-old-"
FAILED = ".replay-failed"  # the last failed run's states, proposals and report, to see why


class OutputError(ReplayError):
    """--out cannot be used as it is."""


def made_by_run(out: Path) -> bool:
    """Whether `out` holds a run.json written by replay.run (any version: a JSON object with `source`)."""
    try:
        data = orjson.loads((out / MARKER).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(data, dict) and "source" in data


def writable_dir_problem(out: Path) -> str | None:
    """Why `out` cannot be the output folder (a file, or nowhere to write), or None.

    >>> writable_dir_problem(Path("/")) is None or "cannot be written" in writable_dir_problem(Path("/"))
    True
    """
    if out.exists() and not out.is_dir():
        return "is a file, not a folder"
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        return f"cannot be created ({existing} is a file)"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot be written ({existing} is not writable)"
    return None


def check_out(out: Path, force: bool) -> None:
    """Refuse an OUT that would mix or destroy files replay.run did not write. Raises OutputError."""
    if problem := writable_dir_problem(out):
        raise OutputError(f"--out {out} {problem}")
    if not out.is_dir() or made_by_run(out):
        return
    theirs = sorted(p.name for p in out.iterdir() if not p.name.startswith((_WORK, _OLD, FAILED)))
    if not theirs:
        return
    if not force:
        listed = ", ".join(theirs[:3]) + (", ..." if len(theirs) > 3 else "")
        raise OutputError(f"--out {out} is a non-empty folder replay.run did not make ({len(theirs)} "
                          f"entries: {listed}): pass a new or empty folder, or --force to write beside them")
    if clashes := [name for name in RUN_FILES if (out / name).exists() or (out / name).is_symlink()]:
        raise OutputError(f"--out {out}: {', '.join(clashes)} would be replaced and are not replay.run's: "
                          f"move them away (--force never deletes or replaces your files)")


@contextmanager
def run_folder(out: Path) -> Iterator[Path]:
    """A fresh folder inside `out` to write the run into; removed if the run does not finish.
    Folders left by runs killed earlier (their pid is gone) are removed first."""
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    _remove_stale(out)
    work = out / f"{_WORK}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)  # gone already when it was swapped in or kept
        if created and not any(out.iterdir()):
            out.rmdir()  # a run that made OUT and wrote nothing leaves nothing behind


def swap_in(work: Path, out: Path) -> None:
    """Replace the previous run's files in `out` with `work`'s: renames only, so OUT holds the old
    run's files or the new run's, each whole (only a kill between two renames could leave both)."""
    old = out / f"{_OLD}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    old.mkdir()
    for name in RUN_FILES:
        if (out / name).exists() or (out / name).is_symlink():
            os.replace(out / name, old / name)
    for name in RUN_FILES:
        if (work / name).exists():
            os.replace(work / name, out / name)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out / FAILED, ignore_errors=True)  # a success makes the last failure's files stale


def keep_failed(work: Path, out: Path) -> Path:
    """Keep a failed run's folder as `out/.replay-failed` (replacing an older one); OUT is untouched."""
    target = out / FAILED
    shutil.rmtree(target, ignore_errors=True)
    os.replace(work, target)
    return target


def _remove_stale(out: Path) -> None:
    for path in out.iterdir():
        if not path.name.startswith((_WORK, _OLD)) or _alive(path.name):
            continue
        if path.name.startswith(_OLD):  # a swap killed between renames: put back what did not land
            for name in RUN_FILES:
                if (path / name).exists() and not (out / name).exists():
                    os.replace(path / name, out / name)
        shutil.rmtree(path, ignore_errors=True)


def _alive(name: str) -> bool:
    """Whether the run that named a folder `.replay-run-<pid>-<id>` is still running.

    >>> _alive(f".replay-run-{os.getpid()}-abc"), _alive(".replay-run-x-abc")
    (True, False)
    """
    pid = name.split("-")[-2]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
