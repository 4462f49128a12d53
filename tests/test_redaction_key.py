"""The redaction key is made once per user cache and read whole by every run, even runs that start at once
(two runs on one cache, pytest-xdist workers): a run that read it half-written would tag its placeholders
with another key than the runs beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from replay.ingest.redaction import redaction_key

ROOT = Path(__file__).resolve().parents[1]
READ_KEY = "from replay.ingest.redaction import redaction_key; print(redaction_key().decode())"


def test_runs_that_start_together_read_one_whole_key(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("REPLAY_REDACT_KEY", None)
    runs = [subprocess.Popen([sys.executable, "-c", READ_KEY], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             text=True) for _ in range(8)]
    keys = {run.communicate(timeout=120)[0].strip() for run in runs}
    assert len(keys) == 1 and len(keys.pop()) == 64
    key_file = tmp_path / "teacher-replay" / "redact.key"
    assert [p.name for p in key_file.parent.iterdir()] == ["redact.key"]     # no temporary file left
    assert key_file.stat().st_mode & 0o777 == 0o600


def test_the_environment_key_wins(monkeypatch) -> None:
    monkeypatch.setenv("REPLAY_REDACT_KEY", "k")
    assert redaction_key() == b"k"
