"""A restored state kept for the other branches of the same state: the first branch of a state on an
engine replays the rollout into its container and commits it; the others start from that image.

Measured (bench/verify_restore.py): replaying costs each branch the state's own history again (seconds
per turn when turns run tests: 38 s at 16 turns on the toy), a container from a committed image ~2 s
whatever the depth, a commit ~1 s. With 2 × N branches per state, one replay per state and engine
instead of one per branch; every restore is still a replay of the rollout's own calls, checked
against the record, on whichever node runs it (images never leave their engine).

Images are named `teacher-replay-verify/state:<run id>-<state key>` and carry the run's labels; each is
removed once its state's branches are done, and every one of the run's at its end (each node's with
--ray); a killed run's are removed by the next verification of the same folder. Branches of one state
wait for each other's restore through a lock file per state on the machine (threads and Ray workers
alike); branches of other states do not wait.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from collect.runtime import LABEL

log = logging.getLogger("collect")
SNAPSHOTS = "teacher-replay-verify/state"
LABEL_STATE = "teacher-replay.verify.state"


def snapshot_tag(run_id: str, state_key: str) -> str:
    """The image tag of a state's snapshot in a run (a docker tag: 128 characters of [\\w.-] at most).

    >>> snapshot_tag("verify-20260101T000000-abcdef", "0123456789abcdef0123")
    'verify-20260101T000000-abcdef-0123456789abcdef'
    """
    return f"{run_id}-{state_key[:16]}"


def _locks(run_id: str) -> Path:
    return Path(tempfile.gettempdir()) / "teacher-replay-verify-locks" / run_id


@contextmanager
def state_lock(run_id: str, state_key: str) -> Iterator[None]:
    """Held while a branch restores its state: the others of that state on this machine wait for it."""
    import fcntl

    folder = _locks(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{state_key[:16]}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)     # separate opens conflict: threads and processes alike
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def find_snapshot(client: Any, run_id: str, state_key: str) -> str | None:
    """The image of this state this engine holds for the run, or None."""
    import docker

    name = f"{SNAPSHOTS}:{snapshot_tag(run_id, state_key)}"
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return None
    return name


def take_snapshot(container: Any, run_id: str, state_key: str) -> None:
    """Commit the restored container (it keeps the run's labels); a failure only costs later branches a
    replay of their own.

    Not paused: nothing runs in it but its idle init once the replay's commands have ended, and pausing
    it (docker's default) raced with the last exec's cleanup on a loaded engine: "failed to delete
    process ... current process state: pausing", then the container was gone under its branch."""
    try:
        container.commit(repository=SNAPSHOTS, tag=snapshot_tag(run_id, state_key), pause=False,
                         changes=[f'LABEL {LABEL_STATE}="{state_key[:16]}"'])
    except Exception as exc:  # noqa: BLE001 - the branch goes on from its own container
        log.warning("could not keep the restored state %s: %s", state_key[:16], exc)


def remove_snapshots(client: Any, labels: dict[str, str], keep_run: str | None = None,
                     state_key: str | None = None) -> int:
    """Remove the snapshot images carrying every one of `labels` (one state's with `state_key`), but
    those of the run `keep_run`."""
    import docker

    wanted = [f"{key}={value}" for key, value in labels.items()]
    if state_key is not None:
        wanted.append(f"{LABEL_STATE}={state_key[:16]}")
    gone = 0
    for image in client.images.list(name=SNAPSHOTS, filters={"label": wanted}):
        if keep_run is not None and (image.labels or {}).get(LABEL) == keep_run:
            continue
        try:
            client.images.remove(image.id, force=True)
            gone += 1
        except docker.errors.APIError as exc:     # still used by a container: the run's end removes it
            log.warning("could not remove the snapshot %s: %s", image.short_id, exc.explanation or exc)
    return gone


def forget(run_id: str) -> None:
    """The run's lock files on this machine."""
    shutil.rmtree(_locks(run_id), ignore_errors=True)


def remove_on_node(labels: dict[str, str], keep_run: str | None = None, state_key: str | None = None) -> int:
    """A Ray task: `remove_snapshots` on this node's engine (and its lock files at the run's end)."""
    import docker

    gone = remove_snapshots(docker.from_env(), labels, keep_run, state_key)
    if state_key is None and LABEL in labels:
        forget(labels[LABEL])
    return gone
