"""Names in prose (issue #58) leave look-alikes alone: gitleaks' false-positive cases and the benign
look-alikes of tests/secret_corpus.py come out of a dry run the same with the name pass on and with
`--no-names` (pseudonymisation on in both: the pass is what is compared), as user prompts and as
assistant text, the two places the pass reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingestion.store import load_states
from replay.run import main
from teachers import person_names
from tests.secret_corpus import BENIGN
from tests.sessions import assistant, text, user, write_session
from tests.test_gitleaks_cases import DATA, _sessions

pytestmark = pytest.mark.skipif(not person_names.available(),
                                reason="spaCy's English model is not installed (pip install '.[names]')")


def _benign(folder: Path) -> None:
    """Each benign look-alike as a user prompt, then as the assistant's answer to it."""
    records: list[dict[str, Any]] = []
    parent = None
    for n, line in enumerate(BENIGN):
        records.append(user(f"u{n}", parent, line, sessionId="benign"))
        records.append(assistant(f"a{n}", f"u{n}", f"msg_benign_{n}", text(line), sessionId="benign"))
        parent = f"a{n}"
    write_session(folder, records, name="benign")


def _states(source: Path, out: Path, *flags: str) -> list[str]:
    assert main(["--source", str(source), "--out", str(out), "--dry-run", *flags]) == 0
    return [json.dumps([s.state_id, s.messages, s.student_action.model_dump()], sort_keys=True)
            for s in load_states(out)]


def test_gitleaks_false_positives_and_benign_look_alikes_are_the_same_on_and_off(tmp_path: Path) -> None:
    cases = json.loads(DATA.read_text())
    fps = [c["text"] for c in cases["fps"] if not c["flagged_by"]]
    assert len(fps) == 340
    source = tmp_path / "sessions"
    _sessions(source, fps)
    _benign(source)
    on = _states(source, tmp_path / "on")
    off = _states(source, tmp_path / "off", "--no-names")
    report = json.loads((tmp_path / "on" / "report.json").read_text())
    assert report["extra"]["names_in_prose"].startswith("looked for")
    assert "name_in_prose" not in report["pseudonymised"]
    changed = [(a[:160], b[:160]) for a, b in zip(on, off, strict=True) if a != b]
    assert len(on) == len(off) >= len(fps) + len(BENIGN) and changed == []
