"""Load a finished `replay.run` for an ablation: its settings, states and answers, and the pools asked for.

Answers come from the run's `proposals.jsonl`, read once; states are not re-redacted nor re-hashed per
pool.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
from pydantic import ValidationError

from ingestion.schema import Proposal, StrictModel, TraceState
from replay.ablation.pools import (
    AblationError,
    all_subsets,
    leave_one_out,
    split_pools,
    unique_pools,
)
from replay.options import RunConfig
from teachers.registry import TeacherSpec, parse_pool, split_by_family


class TrainSettings(StrictModel):
    """`--train`: the settings every pool's student is trained with (`replay.train.data.TrainOptions`'
    names; the format is DPO, the pools' datasets)."""

    model: str
    epochs: float = 1.0
    max_steps: int = -1
    learning_rate: float | None = None
    lora_r: int = 16
    batch_size: int = 2
    cpu: bool = False
    seed: int = 0


class AblateConfig(StrictModel):
    run: Path
    pools: str | None = None        # "a,b;a;b"
    all_subsets: bool = False
    leave_one_out: bool = False
    out: Path | None = None         # default: <run>/ablation
    allow_calls: bool = False
    allow_missing: bool = False
    command: str = ""
    consensus: str | None = None        # the method to decide with (default: the run's)
    min_agreement: float | None = None  # default: the run's
    recommend: float | None = None      # margin for --recommend (None: no recommendation)
    permutations: int = 200             # sampled Shapley orders beyond 8 teachers
    train: TrainSettings | None = None  # --train: one student per pool, judged on held-out data

    @property
    def out_dir(self) -> Path:
        return self.out if self.out is not None else self.run / "ablation"



@dataclass
class RunData:
    """A finished run as the ablation uses it; `answers` (state_id → proposals, in the run's order)
    grows when --allow-calls fills what the run lacks."""

    config: RunConfig
    specs: list[TeacherSpec]
    states: list[TraceState]
    answers: dict[str, list[Proposal]]


def load_run(run_dir: Path) -> RunData:
    """run.json, the states (ingestion/store.py) and proposals.jsonl of a finished `replay.run --out DIR`."""
    from ingestion.store import STATES_FILE
    from replay.rundir.files import CONFIG_FILE, PROPOSALS_FILE
    from replay.select.filters import asked_states

    for name in (CONFIG_FILE, STATES_FILE):
        if not (run_dir / name).is_file():
            raise AblationError(f"{run_dir / name} not found: --run takes a folder written by "
                                f"`python -m replay.run --out DIR`")
    try:
        config = RunConfig.model_validate(orjson.loads((run_dir / CONFIG_FILE).read_bytes()))
    except (orjson.JSONDecodeError, ValidationError) as error:
        raise AblationError(f"{run_dir / CONFIG_FILE} is not a run config: {str(error).splitlines()[0]}") \
            from error
    if config.pool is None or config.dry_run or not (run_dir / PROPOSALS_FILE).is_file():
        raise AblationError(f"{run_dir} holds no teacher answers (a --dry-run, or a run that did not "
                            f"finish): run `python -m replay.run --teachers ...` first")
    with open(run_dir / PROPOSALS_FILE, "rb") as handle:
        proposals = [Proposal.model_validate(orjson.loads(line)) for line in handle if line.strip()]
    return RunData(config=config, specs=parse_pool(config.pool.teachers),
                   states=list(asked_states(run_dir)), answers=index_answers(proposals))  # --select's


NO_HELD_OUT = ("--train judges each student on held-out traces: make the run with `replay.run --test-split "
               "0.2` (the ablation keeps its test traces out of every pool's training split)")


def held_out_traces(run_dir: Path, config: RunConfig, needed: bool = False) -> frozenset[str] | None:
    """The trace ids of the run's `test` split (`replay.run --test-split`); None when it made none (or,
    unless `needed`, when its dataset cannot be read). Every pool's dataset keeps them out of its
    `train` split, so the pools' students share one held-out set."""
    if config.export.test_split is None:
        if needed:
            raise AblationError(NO_HELD_OUT)
        return None
    from replay.export.dataset import test_split_traces

    path = run_dir / "dataset"
    try:
        traces = test_split_traces(path) or frozenset()
    except (FileNotFoundError, ValueError) as error:
        if not needed:
            return None
        raise AblationError(f"{path}: the run's dataset (its test split) cannot be read: {error}") from error
    if needed and not traces:
        raise AblationError(NO_HELD_OUT)
    return traces


def choose_pools(config: AblateConfig, run_specs: Sequence[TeacherSpec]) -> list[list[TeacherSpec]]:
    """The pools to compute, the run's full pool first; entries of `--pools` are the run's teacher
    names, or (with --allow-calls) any `--teachers` entry, e.g. `x=openai/m@http://host:port/v1`.

    >>> run = parse_pool("gpt-5,deepseek")
    >>> pools = choose_pools(AblateConfig(run=Path("r"), pools="deepseek;deepseek,gpt-5"), run)
    >>> [[t.name for t in pool] for pool in pools]
    [['gpt-5', 'deepseek'], ['deepseek']]
    """
    names = [spec.name for spec in run_specs]
    known = {spec.name: spec for spec in run_specs}
    if config.all_subsets:
        groups: list[Sequence[str]] = list(all_subsets(names))
    elif config.leave_one_out:
        groups = list(leave_one_out(names))
    else:
        groups = [[_resolve(entry, group, known, config.allow_calls) for entry in group]
                  for group in split_pools(config.pools or "")]
        if not groups:
            raise AblationError("--pools names no teacher: e.g. --pools \"gpt-5,deepseek;gpt-5;deepseek\"")
    return [[known[name] for name in pool] for pool in unique_pools(names, groups)]


def _resolve(entry: str, group: list[str], known: dict[str, TeacherSpec], allow_calls: bool) -> str:
    if entry in known:
        return entry
    if not allow_calls:
        raise AblationError(f"pool {','.join(group)!r}: teacher {entry!r} was never queried in this run "
                            f"(its teachers: {', '.join(known)}); pass --allow-calls to ask it through the "
                            f"run's cache")
    spec = parse_pool(entry)[0]
    if spec.name in known and known[spec.name] != spec:
        raise AblationError(f"pool {','.join(group)!r}: {entry!r} reuses the name {spec.name!r} for "
                            f"another model; give it a name of its own (name=model@url)")
    known.setdefault(spec.name, spec)
    return spec.name



def index_answers(proposals: Iterable[Proposal]) -> dict[str, list[Proposal]]:
    """Proposals by state_id, in the order given (the run's order, which tie-breaks may depend on).

    >>> p = lambda s, t: Proposal(state_id=s, teacher=t, model=t)
    >>> answers = index_answers([p("s1", "a"), p("s2", "a"), p("s1", "b")])
    >>> {k: [x.teacher for x in v] for k, v in answers.items()}
    {'s1': ['a', 'b'], 's2': ['a']}
    """
    out: dict[str, list[Proposal]] = {}
    for proposal in proposals:
        out.setdefault(proposal.state_id, []).append(proposal)
    return out


def missing_answers(states: Sequence[TraceState], answers: Mapping[str, Sequence[Proposal]],
                    teachers: Sequence[TeacherSpec], samples: int, allow_same_family: bool
                    ) -> list[tuple[int, TeacherSpec, int]]:
    """(state index, teacher, sample) of every answer an eligible teacher owes and `answers` lacks:
    teachers new to the run, and those an `--early-stop` run never asked. State-major order.

    >>> from ingestion.schema import Action
    >>> s = TraceState(state_id="s", trace_id="t", turn=0, source="claude_code", messages=[],
    ...                student_action=Action(), student_model="claude-sonnet-4-5")
    >>> pool = [TeacherSpec(name="a", model="openai/a"), TeacherSpec(name="b", model="openai/b"),
    ...         TeacherSpec(name="opus", model="claude-opus-4", family="anthropic")]
    >>> [(i, t.name, k) for i, t, k in missing_answers([s], {"s": [Proposal(state_id="s", teacher="a",
    ...     model="openai/a")]}, pool, 1, False)]
    [(0, 'b', 0)]
    """
    out = []
    for index, state in enumerate(states):
        have = {(p.teacher, p.sample) for p in answers.get(state.state_id, ())}
        eligible, _ = split_by_family(teachers, state.student_model, allow_same_family)
        out += [(index, t, k) for t in eligible for k in range(samples) if (t.name, k) not in have]
    return out



def gaps_message(gaps: list[tuple[int, TeacherSpec, int]]) -> str:
    per = Counter(spec.name for _, spec, _ in gaps)
    listed = ", ".join(f"{name} ({n})" for name, n in per.items())
    return (f"{len(gaps)} answers the pools need are not in the run (an --early-stop run asks only until "
            f"the outcome is settled): {listed}; pass --allow-calls to ask them through the run's cache "
            f"(cached answers cost nothing), or --allow-missing to count them as no vote")
