"""The run folder's files after a verification: the dataset, pairs.jsonl and the card rewritten with the
verify columns, report.json with its `verify` counts, verify/values.jsonl (one line per pair: what the
view shows).

The rows come from the run, never from an earlier verification: the first verification keeps the run's
own pairs.jsonl as verify/run_pairs.jsonl and reads it again each time after (so `--verified-only` drops
nothing for good); a pairs.jsonl that `replay.run` has written since is taken as the run's again. Every
file is made in a fresh folder inside OUT and renamed into place once all are made: a verification that
fails or is interrupted leaves OUT as it was.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from replay.export.card import run_card_info
from replay.export.dataset import export_dataset, write_card
from replay.options import RunConfig
from replay.rundir.files import REPORT_FILE, file_sha256, replace_dir, write_bytes, write_json, write_jsonl
from replay.rundir.outdir import run_folder
from replay.rundir.report import Report
from replay.verification.ledger import VERIFY_DIR
from replay.verification.rows import VERIFY_COLUMNS, PairCheck

PAIRS_FILE, RUN_PAIRS = "pairs.jsonl", "run_pairs.jsonl"
SOURCE_FILE, VALUES_FILE = "source.json", "values.jsonl"


def _first_row(path: Path) -> dict[str, Any] | None:
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                return orjson.loads(line)
    return None


def run_rows(run: Path) -> tuple[list[dict[str, Any]], bool]:
    """The run's own rows: pairs.jsonl as replay.run wrote it, kept aside at the first verification; and
    whether they are new (pairs.jsonl is replay.run's: to be kept aside in turn)."""
    pairs, kept = run / PAIRS_FILE, run / VERIFY_DIR / RUN_PAIRS
    path = kept if kept.is_file() and (_ours(run) or not pairs.is_file()) else pairs
    if not path.is_file():
        return [], False
    with open(path, "rb") as handle:
        return [orjson.loads(line) for line in handle if line.strip()], path == pairs


def _ours(run: Path) -> bool:
    """Whether OUT's pairs.jsonl is the one a verification wrote (its hash recorded, or its columns)."""
    source = run / VERIFY_DIR / SOURCE_FILE
    written = orjson.loads(source.read_bytes()).get("written") if source.is_file() else None
    pairs = run / PAIRS_FILE
    first = _first_row(pairs) if pairs.is_file() else None
    return file_sha256(pairs) == written or bool(first and "verification" in first)


def students_by_state(pairs: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """State id → the student's action as the dataset's assistant message (a KTO row may need it)."""
    from replay.export.pairs import action_message

    return {pair.state_id: action_message(pair.student) for pair in pairs if pair.student is not None}


def write_outputs(run: Path, config: RunConfig, rows: list[dict[str, Any]], checks: Iterable[PairCheck],
                  summary: Mapping[str, Any], redact: Any, originals: list[dict[str, Any]] | None) -> None:
    """Everything into a fresh folder inside `run`, then renamed into place (see the module's doc).
    `originals`: the run's rows when pairs.jsonl is replay.run's own (kept as verify/run_pairs.jsonl)."""
    from replay.export.formats import COLUMNS

    with run_folder(run) as work:          # removed on the way out; stale ones of killed runs first
        fmt = config.export.format
        export_dataset(rows, work, test_split=config.export.test_split, fmt=fmt, extra=VERIFY_COLUMNS)
        report = orjson.loads((run / REPORT_FILE).read_bytes()) if (run / REPORT_FILE).is_file() else {}
        report["verify"] = dict(summary)
        write_json(work / REPORT_FILE, report)
        info = run_card_info(config, rows, Report.model_validate(report))
        write_card(work, {**info, "columns": (*COLUMNS[fmt], *VERIFY_COLUMNS), "verify": dict(summary)})
        (work / VERIFY_DIR).mkdir()
        values = (redact(check.model_dump(mode="json")) for check in checks)
        write_jsonl(work / VERIFY_DIR / VALUES_FILE, values)
        if originals is not None:
            write_jsonl(work / VERIFY_DIR / RUN_PAIRS, originals)
        _swap(work, run)


def _swap(work: Path, run: Path) -> None:
    """The made files into place: the run's pairs kept aside first, the record of what was written last."""
    verify = run / VERIFY_DIR
    verify.mkdir(exist_ok=True)
    for name in (RUN_PAIRS, VALUES_FILE):
        if (work / VERIFY_DIR / name).exists():
            os.replace(work / VERIFY_DIR / name, verify / name)
    replace_dir(work / "dataset", run / "dataset")
    for name in (PAIRS_FILE, "README.md", REPORT_FILE):
        os.replace(work / name, run / name)
    write_bytes(verify / SOURCE_FILE, orjson.dumps({"written": file_sha256(run / PAIRS_FILE)}))
