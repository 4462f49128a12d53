"""OUT/verify/branches.jsonl: every branch that ended, one line each, appended as it ends (flushed), so a
rerun — after Ctrl-C, a crash, a lost node — repeats no branch that was graded. Lines are redacted as
everything under OUT is (the text of a mismatch and of an error came from the container or the server).

A branch that was not graded (the student, the engine, the harness failed) is written too, and tried
again by the next run; its last line is what counts. A line cut short by a kill is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import orjson

from collect.branch import BranchJob, BranchResult

BRANCHES_FILE = "branches.jsonl"
VERIFY_DIR = "verify"


def read_ledger(path: Path) -> dict[str, BranchResult]:
    """Key → the last result written for it (a damaged line skipped)."""
    results: dict[str, BranchResult] = {}
    if not path.is_file():
        return results
    with open(path, "rb") as handle:
        for line in handle:
            try:
                entry = orjson.loads(line)
                result = BranchResult.model_validate(entry["result"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
            results[result.key] = result
    return results


def ledger_line(job: BranchJob, result: BranchResult, state_id: str) -> dict[str, Any]:
    """What the ledger keeps of a branch: where it started, which action, and how it ended.

    >>> from ingestion.rollout_format import TurnRecord
    >>> job = BranchJob(key="k", state_key="s", rollout_id="r", instance_id="i", turn=2, arm="chosen",
    ...     sample=1,
    ...     image="x", tools=[], history=[], state=TurnRecord(turn=2, messages=[], response={}), row={},
    ...     max_turns=3, config={})
    >>> sorted(ledger_line(job, BranchResult(key="k", reward=1.0), "s"))
    ['arm', 'key', 'result', 'rollout_id', 'sample', 'state_id', 'turn']
    """
    return {"key": job.key, "state_id": state_id, "rollout_id": job.rollout_id, "turn": job.turn,
            "arm": job.arm, "sample": job.sample, "result": result.model_dump(mode="json")}


class Ledger:
    """Appends lines to branches.jsonl, each redacted by `redact` and flushed at once; the file is made
    by the first line (a verification stopped before any branch ended leaves OUT as it was)."""

    def __init__(self, path: Path, redact: Callable[[Any], Any]) -> None:
        self.path = path
        self._redact = redact
        self._file: IO[bytes] | None = None

    def write(self, line: dict[str, Any]) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab")
        self._file.write(orjson.dumps(self._redact(line)) + b"\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
