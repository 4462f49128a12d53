"""Which of a run's states the models are asked at: the held-out ones (`--states`).

- `auto` (default): `test` when the run's dataset has a test split (`replay.run --test-split`), else
  `sample`.
- `test`: the states of the traces in the dataset's `test` split. The split is by trace, so no held-out
  prompt is a prefix of a training prompt. Every asked state of those traces counts, the agreeing ones
  (which made no row) too.
- `sample[:SHARE]`: a seeded sample of whole traces holding about SHARE of the states (default 0.2).
  Held out only from a model that was not trained on this run's dataset, which holds those traces.
- `all`: every state.
- a file: state ids or trace ids, one a line (a trace id takes all its states).

Only the states the run put to its teachers count (`replay.select`): the others have no consensus.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from ingestion.schema import ReplayError, TraceState

DEFAULT_SHARE = 0.2


class EvalError(ReplayError):
    """`replay.eval` cannot go on: a one-line reason (exit 2)."""


@dataclass
class HeldOut:
    states: list[TraceState]
    how: str                 # a sentence: which states and why they count as held out
    choice: str              # test | sample | all | file


@dataclass(frozen=True)
class Choice:
    kind: str                # auto | test | sample | all | file
    share: float = DEFAULT_SHARE
    path: Path | None = None


def parse_choice(text: str) -> Choice:
    """`--states` as given.

    >>> parse_choice("sample:0.3"), parse_choice("test").kind, parse_choice("sample").share
    (Choice(kind='sample', share=0.3, path=None), 'test', 0.2)
    >>> parse_choice("sample:2")
    Traceback (most recent call last):
    replay.evaluation.heldout.EvalError: --states sample:SHARE takes a share in (0, 1], got '2'
    """
    if text in ("auto", "test", "all", "sample"):
        return Choice(text)
    if text.startswith("sample:"):
        raw = text.removeprefix("sample:")
        try:
            share = float(raw)
        except ValueError:
            share = -1.0
        if not 0 < share <= 1:
            raise EvalError(f"--states sample:SHARE takes a share in (0, 1], got {raw!r}")
        return Choice("sample", share)
    path = Path(text).expanduser()
    if not path.is_file():
        raise EvalError(f"--states {text!r}: not auto, test, sample[:SHARE], all, nor a file of state or "
                        f"trace ids")
    return Choice("file", path=path)


def sample_traces(sizes: dict[str, int], share: float, seed: int) -> set[str]:
    """Whole traces in a seeded order, taken while they stay within `share` of the states (the first
    always: a sample is never empty).

    >>> sizes = {"a": 4, "b": 4, "c": 2, "d": 10}
    >>> picked = sample_traces(sizes, 0.3, seed=0)
    >>> 0 < sum(sizes[t] for t in picked) <= 6, picked == sample_traces(sizes, 0.3, seed=0)
    (True, True)
    """
    order = sorted(sizes)
    random.Random(seed).shuffle(order)
    target, taken, chosen = share * sum(sizes.values()), 0, set()
    for trace in order:
        if not chosen or taken + sizes[trace] <= target:
            chosen.add(trace)
            taken += sizes[trace]
    return chosen


def choose_states(run: Path, choice: Choice, seed: int) -> HeldOut:
    """The held-out states of the run in `run`, in states.jsonl's order (each trace's turns in order)."""
    from replay.select.filters import asked_states

    sizes = _asked_trace_sizes(run)
    kind = choice.kind
    test = _test_traces(run) if kind in ("auto", "test") else None
    if kind == "auto":
        kind = "test" if test is not None else "sample"
    wanted_states: set[str] | None = None
    if kind == "test":
        traces = test
        if traces is None:
            raise EvalError(f"--states test: {run / 'dataset'} has no test split (run replay.run with "
                            f"--test-split SHARE, or pass --states sample)")
        how = "the traces of the dataset's test split (replay.run --test-split)"
    elif kind == "sample":
        traces = sample_traces(sizes, choice.share, seed) if sizes else set()
        how = (f"a seeded sample of {len(traces)} traces (~{choice.share:.0%} of the states, seed {seed}); "
               f"not held out from a model trained on this run's dataset")
    elif kind == "all":
        traces = set(sizes)
        how = "every state of the run (nothing held out)"
    else:
        assert choice.path is not None
        ids = _ids(choice.path)
        traces = ids & sizes.keys()
        wanted_states = ids
        how = f"the states and traces listed in {choice.path}"
    states = [s for s in asked_states(run) if s.trace_id in traces
              or (wanted_states is not None and s.state_id in wanted_states)]
    if not states:
        raise EvalError(f"no held-out states in {run}: {how} holds none of the states the run asked "
                        f"its teachers")
    return HeldOut(states=states, how=how, choice=kind)


def _asked_trace_sizes(run: Path) -> dict[str, int]:
    """Trace id -> its states the run asked (all less selection.json's), from the light rows."""
    from ingestion.store import state_rows
    from replay.select.filters import SELECTION_FILE

    path = run / SELECTION_FILE
    left_out = set(orjson.loads(path.read_bytes())["unselected"]) if path.is_file() else set()
    sizes: dict[str, int] = {}
    for row in state_rows(run):
        if row["state_id"] not in left_out:
            sizes[row["trace_id"]] = sizes.get(row["trace_id"], 0) + 1
    return sizes


def _test_traces(run: Path) -> frozenset[str] | None:
    """The trace ids of the dataset's `test` split, or None when it has none."""
    from replay.export.dataset import test_split_traces

    if not (run / "dataset" / "dataset_dict.json").is_file():
        return None
    return test_split_traces(run / "dataset")


def _ids(path: Path) -> set[str]:
    lines: Iterable[str] = path.read_text(encoding="utf-8").splitlines()
    ids = {line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")}
    if not ids:
        raise EvalError(f"--states {path}: the file lists no state or trace id")
    return ids
