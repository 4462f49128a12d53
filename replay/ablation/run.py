"""`replay.ablate`'s work: load a finished run, gather each pool's answers, decide, write the outputs.

Load → decide → write, each a module of this package importing only the ones before it. Only what
the run lacks needs the teachers: a teacher new to the run, the answers an `--early-stop` run never
asked for, and (`--consensus judge` runs) the judgements of the other pools. Those go through a
`TeacherPool` on the run's own cache and settings, and only with `--allow-calls`; answers the cache
already holds cost nothing. Without it they are an error that says what is missing, unless
`--allow-missing` (early-stop gaps only) counts them as no vote.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from replay.ablation.agreement import agreement_matrix
from replay.ablation.evaluate import Decide, PoolCounts, method_decider
from replay.ablation.load import (
    AblateConfig,
    choose_pools,
    gaps_message,
    held_out_traces,
    load_run,
    missing_answers,
)
from replay.ablation.pools import AblationError
from replay.ablation.quality import Quality, assess, estimate_reliability
from replay.ablation.result import Ablation
from replay.ablation.training import Training
from replay.decide.hindsight import read_recoveries


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
    from replay.ablation.export import evaluate_pools
    from replay.ablation.outputs import write_outputs

    console = console or Console(stderr=True)
    data = load_run(config.run)
    pools = choose_pools(config, data.specs)
    options = data.config.pool
    method = config.consensus or data.config.consensus.method
    min_agreement = data.config.consensus.min_agreement if config.min_agreement is None \
        else config.min_agreement
    assert options is not None  # load_run refused runs without teachers
    if method == "judge" and data.config.consensus.method != "judge":
        raise AblationError("--consensus judge needs a run made with --consensus judge (its --judge)")
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
                raise AblationError(gaps_message(gaps))
            missing = len(gaps)
        deciders: dict[str, Decide] = {}
        if (gaps and config.allow_calls) or method == "judge":
            from replay.ablation.calls import ask_missing

            deciders = asyncio.run(ask_missing(data, pools, gaps if config.allow_calls else [], calls, task,
                                               method == "judge"))
        # Reliability from the full pool's answers, once: the weights of every pool's weighted vote.
        reliability, items = estimate_reliability(data, pools[0])
        recoveries = read_recoveries(config.run)  # among all the run's states, asked or not
        decide = method_decider(method, min_agreement, data.config.consensus.match, reliability.weight)
        held_out = held_out_traces(config.run, data.config, needed=config.train is not None)
        rows, dirs = evaluate_pools(config, data, pools, deciders if method == "judge" else {}, task,
                                    decide, method, min_agreement, recoveries, held_out)
        quality = assess(data, pools[0], rows, method, min_agreement, reliability, items, recoveries,
                         config.recommend, config.permutations)
    training = None
    if config.train is not None:
        training = _train(config, rows, dirs, quality, held_out, console)
    names = [spec.name for spec in data.specs]
    result = Ablation(run=config.run, out=config.out_dir, method=method, rows=rows, dirs=dirs,
                      agreement=agreement_matrix(data.states, data.answers, names),
                      agreement_intent=agreement_matrix(data.states, data.answers, names, "intent"),
                      calls={k: calls[k] for k in ("made", "cached", "failed")}, missing=missing,
                      min_agreement=min_agreement, quality=quality, training=training)
    write_outputs(result)
    return result


def _train(config: AblateConfig, rows: list[PoolCounts], dirs: list[str], quality: Quality,
           held_out: frozenset[str] | None, console: Console) -> Training:
    """--train: a student per pool; the frontier's points gain the trained students' figures."""
    from replay.ablation.training import student_points, train_pools

    assert config.train is not None
    pareto = {point.pool: point.pareto for point in quality.frontier}
    training = train_pools(config.run, config.out_dir, rows, dirs, config.train, held_out,
                           config.pools is not None, pareto, say=lambda text: console.print(text))
    student_points(quality.frontier, training)
    return training


