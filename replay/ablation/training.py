"""`replay.ablate --train`: every pool judged by the student it trains.

One student per pool (`--pools`' pools, else the frontier's Pareto-optimal ones), each trained with
`replay.train.run.train` on its pool's `train` split with the same settings and seed, each judged on the
same held-out yardsticks: the **recovery set** (the run's held-out failed states whose student
recovered, from the traces: no teacher labelled it) and the **full pool's held-out pairs** (its `test`
split). Held-out traces are the run's `--test-split`, so no pool trains on them.

Pools are ranked by the trained student's figures, in this order, the first that differs deciding
(`RANKING`): recovery-set accuracy, held-out-pairs accuracy, recovery-set margin, held-out-pairs margin,
then the cheaper pool. Each student says what put it below the one above (`decided_by`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from replay.ablation.evaluate import PoolCounts
from replay.ablation.load import NO_HELD_OUT, TrainSettings
from replay.ablation.pools import AblationError
from replay.ablation.teachers import Point
from replay.train.figures import Figures
from replay.train.heldout import HELD_OUT, RECOVERY, Pair

STUDENT_DIR = "student"
RANKING = ((RECOVERY, "accuracy"), (HELD_OUT, "accuracy"), (RECOVERY, "margin"), (HELD_OUT, "margin"))


class Student(BaseModel):
    pool: str
    cost_usd: float = 0.0
    output: str | None = None                  # the adapter, <pool>/student
    train_rows: int = 0
    steps: int = 0
    figures: dict[str, Figures] = Field(default_factory=dict)   # yardstick → the trained student's
    gain: dict[str, float | None] = Field(default_factory=dict)  # accuracy over the untrained student's
    gain_per_usd: float | None = None          # the first yardstick's gain per USD of the pool's answers
    rank: int | None = None
    decided_by: str | None = None              # what put it below the student ranked just above
    skipped: str | None = None                 # why no student was trained


class Training(BaseModel):
    settings: TrainSettings
    max_length: int
    held_out_traces: int
    yardsticks: dict[str, int]                 # pairs per yardstick
    untrained: dict[str, Figures] = Field(default_factory=dict)
    students: list[Student] = Field(default_factory=list)   # in rank order, untrained pools last
    ranking: str = ("recovery-set accuracy, then held-out-pairs accuracy, recovery-set margin, "
                    "held-out-pairs margin, then the cheaper pool")


def chosen_pools(rows: Sequence[PoolCounts], named: bool, pareto: dict[str, bool]) -> list[PoolCounts]:
    """The pools to train: every computed pool when they were named (`--pools`), else the frontier's.

    >>> rows = [PoolCounts(pool=p, teachers=[p]) for p in "abc"]
    >>> [r.pool for r in chosen_pools(rows, False, {"a": False, "b": True, "c": True})]
    ['b', 'c']
    """
    return list(rows) if named else [row for row in rows if pareto.get(row.pool)]


def shared_yardsticks(run: Path, full_pool: Path, held_out: frozenset[str]) -> dict[str, list[Pair]]:
    """The recovery set of the run's held-out traces and the full pool's held-out pairs."""
    from datasets import load_from_disk

    from ingestion.store import load_states
    from replay.train.heldout import pairs_of, recovery_pairs

    test = load_from_disk(str(full_pool / "dataset"))["test"].to_list()
    return {RECOVERY: recovery_pairs((s for s in load_states(run) if s.trace_id in held_out), set(held_out)),
            HELD_OUT: pairs_of(test, {})}


def train_pools(run: Path, out: Path, rows: Sequence[PoolCounts], dirs: Sequence[str],
                settings: TrainSettings, held_out: frozenset[str] | None, named: bool,
                pareto: dict[str, bool], say: Callable[[str], None] = lambda _: None) -> Training:
    """Train and judge the chosen pools' students; the pools' datasets are already written under `out`."""
    from replay.train.data import TrainError, TrainOptions, card_length
    from replay.train.run import train

    if not held_out:
        raise AblationError(NO_HELD_OUT)
    folders = dict(zip((row.pool for row in rows), dirs, strict=True))
    sticks = shared_yardsticks(run, out / dirs[0], held_out)
    training = Training(settings=settings, max_length=card_length(run), held_out_traces=len(held_out),
                        yardsticks={name: len(pairs) for name, pairs in sticks.items()})
    for number, row in enumerate(chosen := chosen_pools(rows, named, pareto), 1):
        folder = out / folders[row.pool]
        student = Student(pool=row.pool, cost_usd=row.cost_usd)
        say(f"training the student of pool {row.pool} ({number}/{len(chosen)})")
        options = TrainOptions(dataset=folder, model=settings.model, format="dpo",
                               output=folder / STUDENT_DIR, epochs=settings.epochs,
                               max_steps=settings.max_steps,
                               max_length=training.max_length, batch_size=settings.batch_size,
                               learning_rate=settings.learning_rate, lora_r=settings.lora_r,
                               cpu=settings.cpu, seed=settings.seed)
        try:
            report = train(options, sticks, quiet=True)
        except TrainError as error:
            student.skipped = str(error)
            training.students.append(student)
            continue
        training.untrained = training.untrained or report.before.yardsticks
        student.output, student.train_rows, student.steps = f"{folders[row.pool]}/{STUDENT_DIR}", \
            report.rows["train"], report.steps
        student.figures = report.after.yardsticks
        training.students.append(student)
    training.students = rank(training.students, training.untrained)
    return training


def _value(student: Student, key: tuple[str, str]) -> float:
    figures = student.figures.get(key[0])
    value = getattr(figures, key[1]) if figures is not None else None
    return float("-inf") if value is None else value


def rank(students: Sequence[Student], untrained: dict[str, Figures]) -> list[Student]:
    """Trained students best first (`RANKING`), each with its gain and what decided its place;
    untrained pools after them.

    >>> f = lambda a, m: {RECOVERY: Figures(pairs=4, accuracy=a, margin=m), HELD_OUT: Figures()}
    >>> ranked = rank([Student(pool="x", figures=f(0.5, 1.0), cost_usd=2.0),
    ...                Student(pool="y", figures=f(1.0, 0.5), cost_usd=4.0),
    ...                Student(pool="z", figures=f(1.0, 0.5), cost_usd=1.0)],
    ...               {RECOVERY: Figures(accuracy=0.0)})
    >>> for s in ranked: print(s.rank, s.pool, s.decided_by)
    1 z None
    2 y a tie on every figure: the cheaper pool first
    3 x recovery_set accuracy: 1.000 against 0.500
    >>> ranked[0].gain[RECOVERY], ranked[0].gain_per_usd
    (1.0, 1.0)
    """
    trained = sorted((s for s in students if s.skipped is None),
                     key=lambda s: (*(-_value(s, key) for key in RANKING), s.cost_usd, s.pool))
    for number, student in enumerate(trained, 1):
        student.rank = number
        for name, figures in student.figures.items():
            before = untrained.get(name, Figures()).accuracy
            student.gain[name] = None if figures.accuracy is None or before is None \
                else round(figures.accuracy - before, 4)
        first = first_gain(student)
        student.gain_per_usd = round(first / student.cost_usd, 4) \
            if first is not None and student.cost_usd else None
        if number > 1:
            student.decided_by = _decided(trained[number - 2], student)
    return trained + [s for s in students if s.skipped is not None]


def first_gain(student: Student) -> float | None:
    """The gain on the recovery set, else on the held-out pairs (None without either)."""
    return next((student.gain[n] for n in (RECOVERY, HELD_OUT) if student.gain.get(n) is not None), None)


def _decided(above: Student, below: Student) -> str:
    for key in RANKING:
        if _value(above, key) != _value(below, key):
            return f"{key[0]} {key[1]}: {_value(above, key):.3f} against {_value(below, key):.3f}"
    return "a tie on every figure: the cheaper pool first"


def student_points(points: Sequence[Point], training: Training) -> None:
    """Give the frontier's points their trained students' figures (in place): the accuracy on the first
    yardstick with pairs (the recovery set, else the held-out pairs) and its gain per USD."""
    first = next((name for name in (RECOVERY, HELD_OUT) if training.yardsticks.get(name)), None)
    trained = {s.pool: s for s in training.students if s.skipped is None}
    for point in points:
        student = trained.get(point.pool)
        if student is not None and first is not None:
            point.student = student.figures[first].accuracy
            point.student_gain_per_usd = student.gain_per_usd
