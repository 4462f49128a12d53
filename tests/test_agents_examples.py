"""The scripts that make Codex CLI and Gemini CLI sessions with the real CLIs (examples/make_*_sessions.py):
where the CLI is cached (they fetch it from npm once), the sessions they make now have the shape of the
committed ones in tests/data/agents/*/made/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "teacher-replay"
SCRIPTS = {
    "codex": ("make_codex_sessions.py", CACHE / "codex" / "0.50.0" / "codex"),
    "gemini": ("make_gemini_sessions.py",
               CACHE / "gemini-cli" / "0.61.0" / "package" / "bundle" / "gemini.js"),
}


def shape(folder: Path) -> list[tuple[list[str], str, str | None]]:
    states = list(iter_states(folder, IngestOptions(), IngestStats()))
    return [([c.name for c in s.student_action.tool_calls], s.metadata["outcome"]["kind"], s.student_model)
            for s in states]


@pytest.mark.parametrize("fmt", sorted(SCRIPTS))
def test_the_script_makes_sessions_of_the_committed_shape(fmt: str, tmp_path: Path) -> None:
    script, cli = SCRIPTS[fmt]
    if not cli.exists():
        pytest.skip(f"the CLI is not cached at {cli} (python examples/{script} fetches it from npm)")
    subprocess.run([sys.executable, str(ROOT / "examples" / script), "--out", str(tmp_path)], check=True,
                   capture_output=True, timeout=600)
    made = shape(tmp_path)
    assert len(made) == 6 and made == shape(ROOT / "tests" / "data" / "agents" / fmt / "made")
