"""gitleaks' own rule tests (tests/data/gitleaks_cases.json, made by tests/gitleaks_cases.py from the rule
files at the commit configs/gitleaks.toml pins) through the CLI path: each case is the user text of
one turn of a session (many per session), `python -m replay.run --dry-run` reads the sessions, and
every file it writes is searched.
- true positives: every credential gitleaks' rule finds is gone from every output (whole, not a piece);
- false positives: the text comes out intact, except those gitleaks' full config flags too
  (`flagged_by` in the data: a fair judge cannot ask us to leave what gitleaks itself redacts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingestion.store import load_states
from replay.run import main
from tests.sessions import assistant, text, user, write_session

DATA = Path(__file__).resolve().parent / "data" / "gitleaks_cases.json"
# Cases per session, each its own user turn (ingestion would join user records in a row, and a case's
# regex could then run into the next one); short sessions keep the repeated history small.
BATCH = 20


@pytest.fixture(scope="module")
def cases() -> dict[str, Any]:
    return json.loads(DATA.read_text())


def _sessions(folder: Path, texts: list[str]) -> None:
    for first in range(0, len(texts), BATCH):
        records: list[dict[str, Any]] = []
        parent = None
        for i, case in enumerate(texts[first:first + BATCH]):
            n = first + i
            records.append(user(f"u{n}", parent, case, sessionId=f"gitleaks-{first}"))
            records.append(assistant(f"a{n}", f"u{n}", f"msg_{n}", text("noted"),
                                     sessionId=f"gitleaks-{first}"))
            parent = f"a{n}"
        write_session(folder, records, name=f"gitleaks-{first}")


def _user_texts(out: Path) -> set[str]:
    """Every user message's text in every state written, one after the other."""
    found: set[str] = set()
    for state in load_states(out):
        found.update(m["content"] for m in state.messages
                     if m["role"] == "user" and isinstance(m["content"], str))
    return found


def _dry_run(root: Path, texts: list[str]) -> tuple[Path, str]:
    _sessions(root / "sessions", texts)
    out = root / "out"
    # --no-pseudonymise: some of gitleaks' cases hold e-mail addresses, which the pseudonymisation (issue
    # #50, tests/test_pseudonymise.py) replaces; this is about secrets.
    assert main(["--source", str(root / "sessions"), "--out", str(out), "--dry-run",
                 "--no-pseudonymise"]) == 0
    written = "\n".join(p.read_text(errors="replace") for p in sorted(out.rglob("*")) if p.is_file())
    return out, written


@pytest.fixture(scope="module")
def tps_run(cases: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    # tps and fps in runs of their own: some fps hold a tp's very value where gitleaks leaves it alone
    return _dry_run(tmp_path_factory.mktemp("tps"), [c["text"] for c in cases["tps"]])


@pytest.fixture(scope="module")
def fps_run(cases: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return _dry_run(tmp_path_factory.mktemp("fps"), [c["text"] for c in cases["fps"]])


def _forms(secret: str) -> set[str]:
    return {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}


def test_the_cases_are_gitleaks_at_the_pinned_commit(cases: dict[str, Any]) -> None:
    header = (Path(__file__).resolve().parents[1] / "configs" / "gitleaks.toml").read_text()[:2000]
    assert cases["commit"] in header and "MIT" in cases["licence"]
    assert cases["counts"]["tps"] == len(cases["tps"]) > 6000
    assert cases["counts"]["fps"] == len(cases["fps"]) > 300


def test_every_true_positive_credential_is_gone(cases: dict[str, Any], tps_run: tuple[Path, str]) -> None:
    _, written = tps_run
    kept = [(c["rule"], secret) for c in cases["tps"] for secret in c["credentials"]
            if any(form in written for form in _forms(secret))]
    assert not kept, f"{len(kept)} credentials of gitleaks' tps kept, e.g. {kept[:5]}"


def test_false_positives_come_out_intact(cases: dict[str, Any], fps_run: tuple[Path, str]) -> None:
    out, _ = fps_run
    texts = _user_texts(out)
    judged = [c for c in cases["fps"] if not c["flagged_by"]]
    # all of them counted, so a case lost on the way (not written, not a user turn) cannot pass unseen
    assert len(judged) == cases["counts"]["fps"] - cases["counts"]["fps_flagged_by_gitleaks"] == 340
    intact = [c for c in judged if c["text"] in texts]
    changed = [(c["rule"], c["text"][:80]) for c in judged if c["text"] not in texts]
    assert len(intact) == len(judged), f"{len(changed)} of gitleaks' fps changed, e.g. {changed[:5]}"
