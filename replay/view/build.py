"""`build_view(OUT)`: the run in OUT as static pages in OUT/view/ (open index.html from disk).

One pass over the states, streamed as states.jsonl's rows beside their trace's table (`stream.py`):
each state is decided (`verdicts.py`: read from verdicts.jsonl, or decided again for an older run),
counted (`index.py`), its context placed among its trace's items (`context.py`) and its record written
(`records.py`), so 20,000 states never sit in memory and no file is written per state: one page,
`state.html#N`, draws any state from data/. The view is built in a temporary folder beside the old one
and swapped in at the end: a failed build leaves the previous view whole.
"""

from __future__ import annotations

import gc
import shutil
import time
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from replay.rundir.files import replace_dir
from replay.view.context import TraceItems
from replay.view.index import Index
from replay.view.load import RunOutputs, ViewError, iter_verdicts, load_run
from replay.view.pages import EVAL_PLOT, FRONTIER, RunInfo, overview_page, state_record
from replay.view.records import StateRecords
from replay.view.render import copy_assets, write_index, write_page
from replay.view.stream import iter_rows, trace_state
from replay.view.verdicts import Decision, Setup, decided_again, stored_decision

VIEW_DIR = "view"
PLOT = "ablation.png"


@dataclass
class ViewSummary:
    folder: Path
    states: int
    files: int
    largest_bytes: int
    largest_page: str
    seconds: float


def build_view(run_dir: Path, out: Path | None = None) -> ViewSummary:
    """Write the view of the run in `run_dir` to `out` (default `run_dir/view`)."""
    started = time.monotonic()
    # The build holds every answer of the run and makes no reference cycles: the cyclic collector
    # would walk those objects again and again for nothing (15% of the build of 20,000 states).
    collecting = gc.isenabled()
    gc.disable()
    try:
        run = load_run(run_dir)
        target = out if out is not None else run_dir / VIEW_DIR
        target.parent.mkdir(parents=True, exist_ok=True)
        work = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            (work / "data").mkdir(parents=True)
            sizes = _build(run, work)
            replace_dir(work, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    finally:
        if collecting:
            gc.enable()
    largest = max(sizes, key=lambda item: item[1])
    return ViewSummary(folder=target, states=sizes[-1][2], files=len(sizes), largest_bytes=largest[1],
                       largest_page=largest[0], seconds=round(time.monotonic() - started, 3))


def _build(run: RunOutputs, work: Path) -> list[tuple[str, int, int]]:
    """Every file into `work`; (file name, bytes, states so far) per file written."""
    setup = cache(lambda: _setup(run))      # only to decide states again: it imports the teachers
    info = RunInfo(name=run.folder.resolve().name, folder=str(run.folder.resolve()),
                   teachers=run.teachers, method=run.method,
                   command=run.config.command if run.config is not None else "")
    index, forms = Index(), {}
    items, records = TraceItems(work / "data"), StateRecords(work / "data")
    stored = iter_verdicts(run.folder)
    for number, (row, segments) in enumerate(iter_rows(run.folder)):
        try:
            state_id = row["state_id"]
            if state_id in run.unselected:      # never asked: verdicts.jsonl has no line for it
                decision = Decision("unselected") if run.teachers is not None else Decision("not_asked")
            elif (line := next(stored, None) if stored is not None else None) is not None \
                    and line.get("state_id") == state_id:
                decision = stored_decision(line, run.answers.get(state_id, []))
                _add_forms(forms, state_id, line.get("forms"))
            else:                       # a run from before verdicts.jsonl, or one that does not match
                stored = None
                decision, seen = _decide(row, segments, run, setup())
                _add_forms(forms, state_id, seen)
            index.add(number, row, decision)
            context = items.context(row["segment"], segments.messages, row["messages"])
            records.add(number, row["trace_id"], state_record(row, decision, context,
                                                              run.verification.get(state_id)))
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as error:
            raise ViewError(f"{run.folder}: state {number + 1} of states.jsonl: it, its answers or its "
                            f"verdict are not what replay.run writes ({type(error).__name__}: {error})") \
                from error
    items.close()
    records.close()
    info.states, info.traces = len(index.rows), len(index.names["trace"].values)
    sizes = [(file, size, info.states) for file, size in items.sizes + records.sizes]
    chunks, largest = write_index(work, index.meta(), index.rows)
    sizes.append(("data/*.js", largest, info.states))
    for page, template, extra in (("states.html", "states.html.j2", {"chunks": chunks}),
                                  ("state.html", "state.html.j2", {})):
        sizes.append((page, write_page(work / page, template, title=page.removesuffix(".html"), root="",
                                       run=info, **extra), info.states))
    plot = PLOT if run.ablation_plot is not None else None
    plots = ((run.ablation_plot, PLOT), (run.frontier_plot, FRONTIER), (run.eval_plot, EVAL_PLOT))
    copy_assets(work, [(path, name) for path, name in plots if path is not None])
    if run.sent:   # beside the pages, so the overview's link works wherever they are written
        shutil.copyfile(run.folder / "sent.jsonl", work / "sent.jsonl")
    overview = overview_page(run, index, _matrix(forms, run.teacher_names), plot)
    sizes.append(("index.html", write_page(work / "index.html", "overview.html.j2", title="overview",
                                           root="", run=info, **overview), info.states))
    return sizes


def _decide(row: dict[str, Any], segments: Any, run: RunOutputs,
            setup: Setup | None) -> tuple[Decision, dict[str, str]]:
    """A state decided again with the run's own functions, which take models: its TraceState and its
    answers as Proposals (validated here, for this state only)."""
    from ingestion.schema import Proposal

    answers = {row["state_id"]: [Proposal.model_validate(p) for p in run.answers.get(row["state_id"], [])]}
    return decided_again(trace_state(row, segments), answers, setup, run.judged_pairs)


def _setup(run: RunOutputs) -> Setup | None:
    if run.teachers is None or run.config is None or run.config.pool is None:
        return None
    from teachers.registry import parse_pool

    return Setup(teachers=parse_pool(run.teachers), method=run.method,
                 min_agreement=run.config.consensus.min_agreement, match=run.config.consensus.match,
                 allow_same_family=run.config.pool.allow_same_family,
                 reports_failed="states_failed" in run.report)


def _add_forms(forms: dict[str, dict[str, str]], state_id: str, seen: dict[str, str] | None) -> None:
    """Each teacher's answer form at this state (hashed, as verdicts.jsonl stores them), for the
    teacher × teacher agreement matrix (replay.ablate's rules)."""
    for name, form in (seen or {}).items():
        forms.setdefault(name, {})[state_id] = form


def _matrix(forms: dict[str, dict[str, Any]], names: list[str]) -> Any:
    if len(names) < 2 or not forms:
        return None
    from replay.ablation.agreement import AgreementMatrix, pair_agreement

    cells = [[pair_agreement(a, b, forms.get(a, {}), forms.get(b, {})) for b in names] for a in names]
    return AgreementMatrix(teachers=names, cells=cells)


