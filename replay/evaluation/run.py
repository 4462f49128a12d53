"""`evaluate(config)`: the whole of `replay.eval` — load the run, choose the held-out states, ask the
models, score, estimate, write `OUT/eval/`. `plan(config)` is its dry run."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ingestion.schema import ReplayError, StrictModel
from replay.evaluation.heldout import EvalError, HeldOut, choose_states, parse_choice
from replay.evaluation.results import Evaluation, differences, model_eval, score_all
from replay.evaluation.scoring import MEANINGS, Yardstick, answered, yardstick
from replay.evaluation.statistics import interval_warning
from replay.options import RunConfig


class EvalConfig(StrictModel):
    run: Path
    models: str                       # --models, the syntax of --teachers
    states: str = "auto"              # --states (replay/evaluation/heldout.py)
    seed: int = 0                     # the trace sample and the bootstrap
    max_cost: float | None = None     # USD for this eval's calls (cache hits are free)
    max_tokens: int | None = None     # --max-tokens: each model's reply cap (None: as teachers were asked)
    command: str = ""

    @property
    def out_dir(self) -> Path:
        from replay.evaluation.outputs import EVAL_DIR

        return self.run / EVAL_DIR


class EvalFailed(ReplayError):
    """No model answered at any state: nothing is written (exit 1)."""


@dataclass
class Plan:
    """What an eval would take (the dry run)."""

    held: HeldOut
    traces: int
    estimate: dict[str, dict[str, Any]]   # model -> calls, cached, tokens, USD
    unpriced: dict[str, str]


def load_config(run: Path) -> RunConfig:
    """The run's settings, after checking `run` is a finished run with teacher verdicts."""
    from ingestion.store import STATES_FILE
    from replay.decide.verdicts import VERDICTS_FILE
    from replay.rundir.files import CONFIG_FILE

    if not run.is_dir():
        raise EvalError(f"--run {run}: no such folder (give the --out folder of a replay.run)")
    for name in (CONFIG_FILE, STATES_FILE):
        if not (run / name).is_file():
            raise EvalError(f"{run / name} not found: --run takes a folder written by "
                            f"`python -m replay.run --out DIR`")
    try:
        config = RunConfig.model_validate(orjson.loads((run / CONFIG_FILE).read_bytes()))
    except (orjson.JSONDecodeError, ValidationError) as error:
        raise EvalError(f"{run / CONFIG_FILE} is not a run config: {str(error).splitlines()[0]}") from error
    if config.pool is None or config.dry_run or not (run / VERDICTS_FILE).is_file():
        raise EvalError(f"{run} holds no teacher verdicts (a --dry-run, or a run that did not finish): run "
                        f"`python -m replay.run --teachers ...` first")
    return config


def parse_models(text: str, max_tokens: int | None = None) -> list[Any]:
    """`--models` as `teachers.registry.parse_pool` reads `--teachers`; its errors say --models. With
    `max_tokens` every model's requests carry it (a served student answering in prose otherwise writes to
    its server's default: 1,024 new tokens for `transformers serve`, the rest of the context for vLLM).

    >>> [s.params for s in parse_models("a=openai/m@http://127.0.0.1:9/v1", 64)]
    [{'max_tokens': 64}]
    """
    from teachers.registry import TeacherConfigError, parse_pool

    try:
        specs = parse_pool(text)
    except TeacherConfigError as error:
        raise EvalError(f"--models: {str(error).replace('teacher', 'model')}") from error
    if max_tokens is None:
        return specs
    return [spec.model_copy(update={"params": {**spec.params, "max_tokens": max_tokens}}) for spec in specs]


def plan(config: EvalConfig) -> Plan:
    """--dry-run: the held-out states and, per model, the calls, cached answers and USD; calls nothing."""
    from replay.evaluation.asking import estimate_models, open_pool

    run_config = load_config(config.run)
    specs = parse_models(config.models, config.max_tokens)
    held = choose_states(config.run, parse_choice(config.states), config.seed)
    assert run_config.pool is not None
    pool = open_pool(run_config.pool, specs, config.max_cost)
    try:
        estimate = estimate_models(pool, held.states)
    finally:
        pool.cache.close()
    return Plan(held=held, traces=len({s.trace_id for s in held.states}), estimate=estimate,
                unpriced=pool.unpriced())


def evaluate(config: EvalConfig, console: Console | None = None) -> Evaluation:
    """Ask every model at the held-out states, score, estimate, write OUT/eval/; returns the figures."""
    from replay.ask.pool import check_credentials, stop_unreachable
    from replay.evaluation.asking import ask_models, model_calls, open_pool
    from replay.evaluation.outputs import write_outputs

    console = console or Console(stderr=True)
    run_config = load_config(config.run)
    specs = parse_models(config.models, config.max_tokens)
    held = choose_states(config.run, parse_choice(config.states), config.seed)
    sticks = yardsticks(config.run, held)
    check_credentials(specs)
    assert run_config.pool is not None
    pool = open_pool(run_config.pool, specs, config.max_cost)
    try:
        stop_unreachable(pool, console)
        with _progress(console, len(held.states)) as tick:
            answers = asyncio.run(ask_models(pool, specs, held.states, tick))
    finally:
        pool.cache.close()
    if not any(answered(p) for by_state in answers.values() for p in by_state.values()):
        reasons = sorted({p.error or "" for by_state in answers.values() for p in by_state.values()})
        raise EvalFailed(f"no model answered at any of the {len(held.states)} states "
                         f"({'; '.join(reasons)[:300]}): nothing written")
    scores = score_all(answers, sticks)
    models = [model_eval(spec.name, spec.model, answers[spec.name], scores[spec.name], sticks, config.seed,
                         model_calls(pool, spec.name)) for spec in specs]
    traces = len({s.trace_id for s in held.states})
    warning = interval_warning(traces)
    evaluation = Evaluation(
        run=str(config.run), command=config.command, metrics=MEANINGS, models=models,
        differences=differences([s.name for s in specs], scores, sticks, config.seed),
        held_out={"choice": held.choice, "how": held.how, "states": len(held.states), "traces": traces},
        intervals_reliable=warning is None, interval_warning=warning, verdicts_sha256=_sha256(config.run))
    evaluation.bootstrap["seed"] = config.seed
    write_outputs(evaluation, _records(answers, scores, sticks), config.out_dir)
    return evaluation


def yardsticks(run: Path, held: HeldOut) -> list[Yardstick]:
    """Each held-out state's consensus (verdicts.jsonl) and recovery (states.jsonl), in state order."""
    from replay.decide.hindsight import read_recoveries
    from replay.decide.verdicts import VERDICTS_FILE, stored_result

    wanted = {s.state_id for s in held.states}
    results = {}
    with open(run / VERDICTS_FILE, "rb") as handle:
        for line in handle:
            if line.strip() and (record := orjson.loads(line))["state_id"] in wanted:
                results[record["state_id"]] = stored_result(record)
    recoveries = read_recoveries(run)
    return [yardstick(s, results.get(s.state_id), recoveries.get(s.state_id)) for s in held.states]


def _records(answers: dict[str, dict[str, Any]], scores: dict[str, dict[str, Any]],
             sticks: list[Yardstick]) -> Iterator[dict[str, Any]]:
    """answers.jsonl: per model and state its answer (redacted by the pool), error and scores."""
    for name, by_state in answers.items():
        for stick in sticks:
            proposal = by_state.get(stick.state_id)
            if proposal is None:
                continue
            yield {"model": name, "state_id": stick.state_id, "trace_id": stick.trace_id,
                   "action": proposal.action.model_dump(mode="json") if proposal.action else None,
                   "error": proposal.error, "cached": proposal.cached, "scores": scores[name][stick.state_id]}


def _sha256(run: Path) -> str:
    from replay.decide.verdicts import VERDICTS_FILE

    digest = hashlib.sha256()
    with open(run / VERDICTS_FILE, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def _progress(console: Console, total: int) -> Iterator[Callable[[str], None]]:
    columns = [TextColumn("[bold]asking"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[info]}"), TimeElapsedColumn()]
    with Progress(*columns, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("states", total=total, info="")
        yield lambda info="": bar.update(task, advance=1, info=info)
