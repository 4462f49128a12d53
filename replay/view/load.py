"""Every output of a run the viewer reads, read here and nowhere else.

What a run writes keeps growing (new verdicts, report keys, dataset columns, a new state storage), so
the viewer reads it in one place and tolerates what is absent: a `--dry-run` has no answers, an older
run no `states_failed`, a run without `replay.ablate` no ablation. States are streamed by `stream.py`
through the store's own reader of the trace table.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from ingestion.schema import ReplayError
from replay.options import RunConfig
from replay.rundir.files import file_sha256

PAIRS_FILE = "pairs.jsonl"
ABLATION_DIR = "ablation"
ABLATION_PLOT, ABLATION_TABLE = "ablation.png", "ablation.csv"
TEACHERS_TABLE, FRONTIER_PLOT, ABLATION_JSON = "teachers.csv", "frontier.png", "ablation.json"
EVAL_DIR, EVAL_JSON, EVAL_PLOT = "eval", "eval.json", "eval.png"   # replay.eval's (evaluation/outputs.py)
_PRICE = re.compile(r"#price=[^#\s]+$")     # teachers.registry's price suffix
# What the viewer keeps of a pairs.jsonl row (a judge's choice is only known from it): never the prompt.
PAIR_KEYS = ("state_id", "chosen", "winner_teachers", "teachers", "agreement", "votes", "method")
VERIFY_VALUES = Path("verify") / "values.jsonl"    # replay.verify: each pair's check and its branches


class ViewError(ReplayError):
    """The folder is not a run the viewer can read."""


@dataclass
class RunOutputs:
    """A run folder as the viewer sees it; states are streamed separately (`stream.iter_rows`)."""

    folder: Path
    report: dict[str, Any]
    config: RunConfig | None                     # None: no run.json, or one this version cannot read
    answers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)   # proposals.jsonl's rows
    judged_pairs: dict[str, dict[str, Any]] = field(default_factory=dict)   # judge runs only
    unselected: set[str] = field(default_factory=set)      # ids --select left out (selection.json)
    ablation_rows: list[dict[str, str]] = field(default_factory=list)
    ablation_plot: Path | None = None
    teacher_rows: list[dict[str, str]] = field(default_factory=list)   # ablation/teachers.csv
    frontier_plot: Path | None = None
    recommended: str | None = None                                     # replay.ablate --recommend
    evaluation: dict[str, Any] | None = None                           # replay.eval's eval.json
    eval_stale: bool = False          # eval.json was scored against another verdicts.jsonl than the run's
    eval_plot: Path | None = None
    verification: dict[str, dict[str, Any]] = field(default_factory=dict)   # replay.verify: per pair
    sent: list[dict[str, Any]] = field(default_factory=list)   # sent.jsonl: what left, per teacher (#50)

    @property
    def teachers(self) -> str | None:
        """The pool as given to --teachers, when the run asked teachers."""
        if self.config is None or self.config.pool is None or self.config.dry_run:
            return None
        return self.config.pool.teachers

    @property
    def teacher_names(self) -> list[str]:
        """The pool's teachers by name, in --teachers order (none when no teacher was asked)."""
        return pool_names(self.teachers) if self.teachers is not None else []

    @property
    def method(self) -> str:
        return self.config.consensus.method if self.config is not None else "vote"


def pool_names(teachers: str) -> list[str]:
    """The names `teachers.registry.parse_pool` gives the entries of a `--teachers` pool, in order (a
    test keeps the two equal): a run that was asked parsed its pool already, and importing the teachers
    package to parse it again would cost the view more than a thousand states do.

    >>> pool_names("gpt-5, a=openai/m@http://127.0.0.1:8000/v1,deepseek#price=1/2,b=kimi#price=kimi-k2")
    ['gpt-5', 'a', 'deepseek', 'b']
    """
    entries = (_PRICE.sub("", entry.strip()) for entry in teachers.split(","))
    return [entry.partition("=")[0] if "=" in entry else entry for entry in entries if entry]


def load_run(folder: Path) -> RunOutputs:
    """The run's report, settings, answers and ablation outputs (a one-line ViewError if it is no run)."""
    from ingestion.store import STATES_FILE
    from replay.rundir.files import CONFIG_FILE, PROPOSALS_FILE, REPORT_FILE
    from replay.select.filters import SELECTION_FILE

    if not folder.is_dir():
        raise ViewError(f"{folder}: no such folder (give the --out folder of a replay.run)")
    if not (folder / STATES_FILE).is_file():
        raise ViewError(f"{folder / STATES_FILE} not found: {folder} is not the --out folder of a replay.run")
    outputs = RunOutputs(folder=folder, report=_json(folder / REPORT_FILE) or {},
                         config=_config(folder / CONFIG_FILE), sent=_sent(folder / "sent.jsonl"))
    if (folder / PROPOSALS_FILE).is_file() and outputs.teachers is not None:
        outputs.answers = _answers(folder / PROPOSALS_FILE)
    selection = _json(folder / SELECTION_FILE)
    if isinstance(selection, dict):
        outputs.unselected = set(selection.get("unselected") or ())
    if outputs.method == "judge" and (folder / PAIRS_FILE).is_file():
        outputs.judged_pairs = _pair_rows(folder / PAIRS_FILE)
    if isinstance(outputs.report.get("verify"), dict):   # report.json says the verification is this run's
        outputs.verification = _rows_by_state(folder / VERIFY_VALUES)
    ablation = folder / ABLATION_DIR
    if (ablation / ABLATION_TABLE).is_file():
        with open(ablation / ABLATION_TABLE, newline="", encoding="utf-8") as handle:
            outputs.ablation_rows = list(csv.DictReader(handle))
    if (ablation / ABLATION_PLOT).is_file():
        outputs.ablation_plot = ablation / ABLATION_PLOT
    if (ablation / TEACHERS_TABLE).is_file():
        with open(ablation / TEACHERS_TABLE, newline="", encoding="utf-8") as handle:
            outputs.teacher_rows = list(csv.DictReader(handle))
    if (ablation / FRONTIER_PLOT).is_file():
        outputs.frontier_plot = ablation / FRONTIER_PLOT
    judged = _json(ablation / ABLATION_JSON)
    quality = judged.get("quality") if isinstance(judged, dict) else None
    if isinstance(quality, dict) and quality.get("recommended"):
        outputs.recommended = f"{quality['recommended']} ({quality.get('recommend_why') or ''})".strip(" ()")
    evaluation = _json(folder / EVAL_DIR / EVAL_JSON)
    if isinstance(evaluation, dict) and isinstance(evaluation.get("models"), list):
        outputs.evaluation = evaluation
        outputs.eval_stale = evaluation.get("verdicts_sha256") != file_sha256(folder / "verdicts.jsonl")
        if (folder / EVAL_DIR / EVAL_PLOT).is_file():
            outputs.eval_plot = folder / EVAL_DIR / EVAL_PLOT
    return outputs


def iter_verdicts(folder: Path) -> Iterator[dict[str, Any]] | None:
    """The run's verdicts.jsonl, one state's line at a time in states.jsonl's order; None without one
    (a dry run, or a run from before the file)."""
    from replay.decide.verdicts import VERDICTS_FILE

    path = folder / VERDICTS_FILE
    if not path.is_file():
        return None

    def lines() -> Iterator[dict[str, Any]]:
        with open(path, "rb") as handle:
            for line in handle:
                try:
                    yield orjson.loads(line)
                except orjson.JSONDecodeError:
                    return          # a damaged file: the rest is decided again
    return lines()


def _sent(path: Path) -> list[dict[str, Any]]:
    """sent.jsonl's rows (none for a run made before it was written; a broken line is skipped)."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_bytes().splitlines():
        try:
            rows.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    return rows


def _json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as error:
        raise ViewError(f"{path}: not JSON ({error})") from error


def _config(path: Path) -> RunConfig | None:
    data = _json(path)
    if data is None:
        return None
    try:
        return RunConfig.model_validate(data)
    except ValidationError:
        return None   # a run.json from another version: the states and the report still show


def _answers(path: Path) -> dict[str, list[dict[str, Any]]]:
    """proposals.jsonl's rows by state, in the file's order (the order verdicts.jsonl's groups index).

    Kept as JSON: the view shows them as they are, and validating every answer into a Proposal would
    cost more than the rest of the view (a row that is not an answer stops the build with one line).
    """
    answers: dict[str, list[dict[str, Any]]] = {}
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if line.isspace():
                continue
            try:
                row = orjson.loads(line)
                answers.setdefault(row["state_id"], []).append(row)
            except (orjson.JSONDecodeError, KeyError, TypeError) as error:
                raise ViewError(f"{path}:{number}: not a teacher answer ({error})") from error
    return answers


def _rows_by_state(path: Path) -> dict[str, dict[str, Any]]:
    """A JSONL file's rows by their state id (none when it is absent)."""
    rows = {}
    if path.is_file():
        with open(path, "rb") as handle:
            for line in handle:
                if line.strip():
                    row = orjson.loads(line)
                    rows[row["state_id"]] = row
    return rows


def _pair_rows(path: Path) -> dict[str, dict[str, Any]]:
    rows = {}
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                row = orjson.loads(line)
                rows[row["state_id"]] = {key: row.get(key) for key in PAIR_KEYS}
    return rows
