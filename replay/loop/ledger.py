"""`OUT/loop.json`: every finished stage of every round with its figures and seconds, and the stage running.

Written whole after every change (a temporary file renamed over it), so a kill at any moment leaves the
last finished stage on record: a rerun skips what is recorded and redoes the stage that was running (its
teacher calls come from the loop's cache, so none is paid twice).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from replay.loop.config import LoopError

LEDGER_FILE = "loop.json"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Ledger:
    def __init__(self, out: Path, settings: dict[str, Any]):
        self.path = out / LEDGER_FILE
        self.data: dict[str, Any] = {"settings": settings, "rounds": {}, "running": None}
        if self.path.is_file():
            try:
                old = orjson.loads(self.path.read_bytes())
            except orjson.JSONDecodeError as error:
                raise LoopError(f"{self.path} is not JSON ({error}): move it away to start over") from None
            changed = _changed(old.get("settings", {}), settings)
            if changed:
                raise LoopError(f"{out} holds a loop run with other settings ({', '.join(changed)}): give "
                                f"another --out, or the same flags to resume it")
            self.data = old | {"settings": settings}

    def done(self, round_: int, stage: str) -> dict[str, Any] | None:
        return self.data["rounds"].get(str(round_), {}).get("stages", {}).get(stage)

    def start(self, round_: int, stage: str) -> float:
        """Mark the stage running; returns its start. A stage started again after a kill keeps the epoch
        of its first start (`first_epoch`): what its killed attempts paid is counted from there."""
        running = self.data.get("running") or {}
        again = (running.get("round"), running.get("stage")) == (round_, stage)
        first = running.get("first_epoch") if again else None
        self.data["running"] = {"round": round_, "stage": stage, "started_at": _now(),
                                "first_epoch": first or time.time()}
        self.save()
        return time.monotonic()

    def first_epoch(self) -> float:
        return (self.data.get("running") or {}).get("first_epoch") or time.time()

    def finish(self, round_: int, stage: str, began: float, figures: dict[str, Any]) -> dict[str, Any]:
        record = {"seconds": round(time.monotonic() - began, 1), "finished_at": _now(), **figures}
        self.data["rounds"].setdefault(str(round_), {"stages": {}})["stages"][stage] = record
        self.data["running"] = None
        self.save()
        return record

    def set_round(self, round_: int, key: str, value: Any) -> None:
        self.data["rounds"].setdefault(str(round_), {"stages": {}})[key] = value
        self.save()

    def save(self) -> None:
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temp.write_bytes(orjson.dumps(self.data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        os.replace(temp, self.path)


# Settings that may differ on a resume: more rounds, and how the servers run (not what they serve).
RESUMABLE = {"rounds", "command", "device", "vllm_args", "url"}


def _changed(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The settings a resumed loop may not change (those that decide what finished stages made).

    >>> _changed({"rounds": 1, "seed": 0}, {"rounds": 3, "seed": 0})
    []
    >>> _changed({"rounds": 1, "seed": 0}, {"rounds": 1, "seed": 1})
    ['--seed']
    """
    keys = (set(old) | set(new)) - RESUMABLE
    return [f"--{key.replace('_', '-')}" for key in sorted(keys) if old.get(key) != new.get(key)]
