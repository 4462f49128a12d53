"""`replay.ablate`'s work: load a finished run, gather each pool's answers, decide, write the outputs.

Answers come from the run's `proposals.jsonl`, read once; states are not re-redacted nor re-hashed per
pool. Only what the run lacks needs the teachers: a teacher new to the run, the answers an
`--early-stop` run never asked for, and (`--consensus judge` runs) the judgements of the other pools.
Those go through a `TeacherPool` on the run's own cache and settings, and only with `--allow-calls`;
answers the cache already holds cost nothing. Without it they are an error that says what is
missing, unless `--allow-missing` (early-stop gaps only) counts them as no vote.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
from pydantic import BaseModel, Field, ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ingestion.schema import Proposal, StrictModel, TraceState
from replay.ablation import (
    AblationError,
    Decide,
    PoolCounts,
    all_subsets,
    index_answers,
    leave_one_out,
    missing_answers,
    split_pools,
    unique_pools,
)
from replay.ablation_agreement import AgreementMatrix, agreement_matrix
from replay.options import RunConfig
from teachers.registry import TeacherSpec, parse_pool


class AblateConfig(StrictModel):
    run: Path
    pools: str | None = None        # "a,b;a;b"
    all_subsets: bool = False
    leave_one_out: bool = False
    out: Path | None = None         # default: <run>/ablation
    allow_calls: bool = False
    allow_missing: bool = False
    command: str = ""

    @property
    def out_dir(self) -> Path:
        return self.out if self.out is not None else self.run / "ablation"


class Ablation(BaseModel):
    """What `ablate` computed and wrote; rows[0] is the run's full pool."""

    run: Path
    out: Path
    method: str
    rows: list[PoolCounts]
    dirs: list[str]
    agreement: AgreementMatrix
    calls: dict[str, int] = Field(default_factory=lambda: {"made": 0, "cached": 0, "failed": 0})
    missing: int = 0  # answers counted as no vote (--allow-missing)


@dataclass
class RunData:
    """A finished run as the ablation uses it; `answers` (state_id → proposals, in the run's order)
    grows when --allow-calls fills what the run lacks."""

    config: RunConfig
    specs: list[TeacherSpec]
    states: list[TraceState]
    answers: dict[str, list[Proposal]]


def load_run(run_dir: Path) -> RunData:
    """run.json, states.jsonl and proposals.jsonl of a finished `replay.run --out DIR`."""
    from replay.pipeline import CONFIG_FILE, PROPOSALS_FILE, STATES_FILE, load_states

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
                   states=list(load_states(run_dir / STATES_FILE)), answers=index_answers(proposals))


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


@contextmanager
def _progress(console: Console) -> Iterator[Callable[[str, int], Callable[[str], None]]]:
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[info]}"), TimeElapsedColumn()]
    with Progress(*columns, console=console, disable=not console.is_terminal) as bar:
        def task(label: str, total: int) -> Callable[[str], None]:
            task_id = bar.add_task(label, total=total, info="")
            return lambda info="": bar.update(task_id, advance=1, info=info)

        yield task


def ablate(config: AblateConfig, console: Console | None = None) -> Ablation:
    """Compute every pool, write `<out>/<pool>/dataset` (+ pairs.jsonl, README.md) per pool and the
    tables and plot; returns what it wrote."""
    from replay.ablation_export import evaluate_pools
    from replay.ablation_outputs import write_outputs

    console = console or Console(stderr=True)
    data = load_run(config.run)
    pools = choose_pools(config, data.specs)
    options = data.config.pool
    method = data.config.consensus.method
    assert options is not None  # load_run refused runs without teachers
    if method == "judge" and not config.allow_calls:
        raise AblationError("this run used --consensus judge: a pool's consensus needs a judge call, so "
                            "pass --allow-calls (judgements are cached; the full pool's cost nothing)")
    teachers = list({t.name: t for pool in pools for t in pool}.values())
    samples = 1 if data.config.consensus.early_stop else options.samples  # early stop asks sample 0 only
    gaps = missing_answers(data.states, data.answers, teachers, samples, options.allow_same_family)
    calls: Counter[str] = Counter()
    missing = 0
    with _progress(console) as task:
        if gaps and not config.allow_calls:
            if not config.allow_missing:
                raise AblationError(_gaps_message(gaps))
            missing = len(gaps)
        deciders: dict[str, Decide] = {}
        if (gaps and config.allow_calls) or method == "judge":
            from replay.ablation_calls import ask_missing

            deciders = asyncio.run(ask_missing(data, pools, gaps if config.allow_calls else [], calls, task))
        rows, dirs = evaluate_pools(config, data, pools, deciders, task)
    matrix = agreement_matrix(data.states, data.answers, [spec.name for spec in data.specs])
    result = Ablation(run=config.run, out=config.out_dir, method=method, rows=rows, dirs=dirs,
                      agreement=matrix, calls={k: calls[k] for k in ("made", "cached", "failed")},
                      missing=missing)
    write_outputs(result)
    return result


def _gaps_message(gaps: list[tuple[int, TeacherSpec, int]]) -> str:
    per = Counter(spec.name for _, spec, _ in gaps)
    listed = ", ".join(f"{name} ({n})" for name, n in per.items())
    return (f"{len(gaps)} answers the pools need are not in the run (an --early-stop run asks only until "
            f"the outcome is settled): {listed}; pass --allow-calls to ask them through the run's cache "
            f"(cached answers cost nothing), or --allow-missing to count them as no vote")
