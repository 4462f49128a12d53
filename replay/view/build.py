"""`build_view(OUT)`: the run in OUT as static pages in OUT/view/ (open index.html from disk).

One pass over the states, streamed: each state is decided (`verdicts.py`), counted (`index.py`) and
written as its own page, so 20,000 states never sit in memory. The view is built in a temporary folder
beside the old one and swapped in at the end: a failed build leaves the previous view whole.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingestion.schema import TraceState
from replay.ablation.agreement import AgreementMatrix, pair_agreement
from replay.files import replace_dir
from replay.verdicts import form_hash
from replay.view.content import RECENT
from replay.view.context import TraceData
from replay.view.index import Index
from replay.view.load import RunOutputs, iter_states, iter_verdicts, load_run
from replay.view.pages import FRONTIER, RunInfo, overview_page, state_record
from replay.view.render import copy_assets, state_shell, write_index, write_page
from replay.view.verdicts import Decision, Setup, decide_state, stored_decision

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
    run = load_run(run_dir)
    target = out if out is not None else run_dir / VIEW_DIR
    target.parent.mkdir(parents=True, exist_ok=True)
    work = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        (work / "states").mkdir(parents=True)
        (work / "data").mkdir()
        sizes = _build(run, work)
        replace_dir(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    largest = max(sizes, key=lambda item: item[1])
    return ViewSummary(folder=target, states=sizes[-1][2], files=len(sizes), largest_bytes=largest[1],
                       largest_page=largest[0], seconds=round(time.monotonic() - started, 3))


def _build(run: RunOutputs, work: Path) -> list[tuple[str, int, int]]:
    """Every page into `work`; (file name, bytes, states so far) per file written."""
    setup = _setup(run)
    info = RunInfo(name=run.folder.resolve().name, folder=str(run.folder.resolve()),
                   teachers=run.teachers, method=run.method,
                   command=run.config.command if run.config is not None else "")
    index, forms, traces = Index(), {}, set()
    sizes: list[tuple[str, int, int]] = []
    page_of = "{}.html".format
    data = TraceData(work / "data")
    stored = iter_verdicts(run.folder)
    for number, (prev, state, following) in enumerate(_neighbours(iter_states(run.folder))):
        if state.state_id in run.unselected:      # never asked: verdicts.jsonl has no line for it
            decision = Decision("unselected") if setup is not None else Decision("not_asked")
        elif (line := next(stored, None) if stored is not None else None) is not None \
                and line.get("state_id") == state.state_id:
            decision = stored_decision(line, run.answers)
            for name, form in (line.get("forms") or {}).items():
                forms.setdefault(name, {})[state.state_id] = form
        else:                       # a run from before verdicts.jsonl, or one that does not match
            stored = None
            decision = decide_state(state, run.answers, setup, run.judged_pairs)
            _add_forms(forms, state, run)
        index.add(number, state, decision)
        traces.add(state.trace_id)
        record = state_record(state, decision,
                              page_of(number - 1) if prev and prev.trace_id == state.trace_id else None,
                              page_of(number + 1) if following and following.trace_id == state.trace_id
                              else None)
        context = data.add_state(number, state.trace_id, state.messages, record)
        name = f"states/{number}.html"
        page = state_shell(number, f"{state.trace_id} · {state.turn}", info.name, info.folder, context,
                           RECENT)
        (work / name).write_bytes(page)
        sizes.append((name, len(page), number + 1))
    data.close()
    sizes.extend((file, size, len(index.rows)) for file, size in data.sizes)
    info.states, info.traces = len(index.rows), len(traces)
    chunks, largest = write_index(work, index.meta(), index.rows)
    sizes.append(("data/*.js", largest, info.states))
    sizes.append(("states.html", write_page(work / "states.html", "states.html.j2", title="states", root="",
                                            run=info, chunks=chunks), info.states))
    plot = PLOT if run.ablation_plot is not None else None
    plots = ((run.ablation_plot, PLOT), (run.frontier_plot, FRONTIER))
    copy_assets(work, [(path, name) for path, name in plots if path is not None])
    overview = overview_page(run, index, _matrix(forms, setup), plot)
    sizes.append(("index.html", write_page(work / "index.html", "overview.html.j2", title="overview",
                                           root="", run=info, **overview), info.states))
    return sizes


def _setup(run: RunOutputs) -> Setup | None:
    if run.teachers is None or run.config is None or run.config.pool is None:
        return None
    from teachers.registry import parse_pool

    return Setup(teachers=parse_pool(run.teachers), method=run.method,
                 min_agreement=run.config.consensus.min_agreement, match=run.config.consensus.match,
                 allow_same_family=run.config.pool.allow_same_family,
                 reports_failed="states_failed" in run.report)


def _neighbours(states: Iterator[TraceState]) -> Iterator[tuple[TraceState | None, TraceState,
                                                                   TraceState | None]]:
    """(previous, state, next) for each state of a stream, holding two at a time.

    >>> [(p, s, n) for p, s, n in _neighbours(iter([1, 2, 3]))]
    [(None, 1, 2), (1, 2, 3), (2, 3, None)]
    """
    prev, current = None, next(states, None)
    while current is not None:
        following = next(states, None)
        yield prev, current, following
        prev, current = current, following


def _add_forms(forms: dict[str, dict[str, Any]], state: TraceState, run: RunOutputs) -> None:
    """Each teacher's canonical answer at this state, for the agreement matrix (replay.ablate's rules),
    hashed as verdicts.jsonl stores it."""
    from replay.ablation.agreement import answer_forms

    proposals = run.answers.get(state.state_id)
    if proposals:
        teachers = sorted({p.teacher for p in proposals})
        for name, seen in answer_forms([state], {state.state_id: proposals}, teachers).items():
            forms.setdefault(name, {}).update((key, form_hash(form)) for key, form in seen.items())


def _matrix(forms: dict[str, dict[str, Any]], setup: Setup | None) -> AgreementMatrix | None:
    names = [t.name for t in setup.teachers] if setup is not None else []
    if len(names) < 2 or not forms:
        return None
    cells = [[pair_agreement(a, b, forms.get(a, {}), forms.get(b, {})) for b in names] for a in names]
    return AgreementMatrix(teachers=names, cells=cells)


