"""`run_loop(config)`: every stage of every round in order, skipping what `loop.json` records as done."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replay.loop import stages
from replay.loop.config import LoopConfig, LoopError
from replay.loop.ledger import Ledger
from replay.loop.serving import Engine, open_engine
from replay.loop.students import Student, check_student, is_hub_name, merge


def check(config: LoopConfig) -> None:
    """Everything that can be told before a stage runs: one line each (exit 2)."""
    from teachers.registry import TeacherConfigError, parse_pool

    check_student(config.student)
    for flag, path in (("--instances", config.instances), ("--held-out", config.held_out)):
        if not path.is_file():
            raise LoopError(f"{flag} {path}: no such file (SWE-bench rows, JSONL or a JSON list)")
    try:
        parse_pool(config.teachers)
    except TeacherConfigError as error:
        raise LoopError(f"--teachers: {error}") from None
    if config.engine == "url" and not config.url:
        raise LoopError("--engine url needs --url http://HOST:PORT/v1 (the server you run)")
    if config.engine == "url" and config.lora_r <= 0:
        raise LoopError("--engine url loads each round as a LoRA adapter: --lora-r 0 cannot be served "
                        "that way")
    if config.url and config.engine != "url":
        raise LoopError(f"--url is for --engine url (this loop serves with --engine {config.engine})")
    if config.format == "kto" and config.batch_size < 2:
        raise LoopError(KTO_BATCH)


# The mark `Loop.untrained` leaves in a round's adapter folder when there is no adapter to copy (no round had
# trained yet): the round is round 0's weights under its own name. Explicit, so an adapter that is missing
# for any other reason is an error (serving round 0 in its place would measure round 0 as round K).
SAME_AS_ROUND_0 = "same-as-round-0"


KTO_BATCH = ("--format kto needs --batch-size 2 or more: TRL's KTO estimates its KL term from the other rows "
             "of a batch, and refuses a batch of one")


def student(config: LoopConfig, round_: int) -> Student:
    """Round K's student: its weights and the name requests carry. `transformers serve` loads a model by
    the request's `model`, so there the name is the folder; vLLM serves rounds as `round-K`."""
    if round_ == 0:
        folder = config.student if is_hub_name(config.student) else str(Path(config.student).resolve())
        names = {"transformers": folder, "vllm": "round-0", "url": config.served_name or config.student}
        return Student(round=0, folder=folder, name=names[config.engine])
    trained = (stages.round_dir(config, round_) / "trained").resolve()
    if config.lora_r > 0 and (trained / SAME_AS_ROUND_0).is_file():
        # transformers serves the copy of round 0's folder made for it, by its path; vLLM round 0's weights
        # under this round's name
        if config.engine == "transformers":
            folder = str((stages.round_dir(config, round_) / "student").resolve())
            return Student(round=round_, folder=folder, name=folder, untrained=True)
        return Student(round=round_, folder=student(config, 0).folder, name=f"round-{round_}", untrained=True)
    if config.lora_r <= 0:
        folder, adapter = str(trained), None
    else:
        folder, adapter = str((stages.round_dir(config, round_) / "student").resolve()), str(trained)
    name = folder if config.engine == "transformers" else f"round-{round_}"
    return Student(round=round_, folder=folder, name=name, adapter=adapter)


class Loop:
    def __init__(self, config: LoopConfig, engine: Engine, ledger: Ledger):
        self.config, self.engine, self.ledger = config, engine, ledger
        self.stages: dict[str, Callable[[int], dict[str, Any]]] = {
            "collect": self.collect, "pairs": self.pairs, "verify": self.verify, "train": self.train,
            "resolve": self.resolve, "heldout": self.heldout, "eval": self.eval}

    def dir(self, round_: int) -> Path:
        return stages.round_dir(self.config, round_)

    def log(self, round_: int, stage: str) -> Path:
        return self.config.out / "logs" / f"round-{round_}-{stage}.log"

    def _run(self, round_: int, stage: str, argv: list[str]) -> None:
        stages.run_command(argv, self.log(round_, stage), f"round {round_}: {stage} ({Path(argv[2]).name})")

    def _fresh(self, path: Path) -> Path:
        # A stage redone after a kill starts from nothing: a half-written folder is not read as a result.
        shutil.rmtree(path, ignore_errors=True)
        return path

    def resolve(self, round_: int) -> dict[str, Any]:
        who = student(self.config, round_)
        out = self._fresh(self.dir(round_) / "resolve")
        self._run(round_, "resolve", stages.collect_argv(
            self.config, who, self.engine.url(who), self.config.held_out, out, self.config.held_out_samples,
            evaluate=True, seed=self.config.seed))
        return {"student": who.name} | stages.rollout_figures(out)

    def heldout(self, round_: int) -> dict[str, Any]:
        out = self.config.heldout_run
        self._run(round_, "heldout", stages.run_argv(self.config, self.dir(0) / "resolve", out, None))
        return stages.pairs_figures(out, self.config.cache, self.ledger.first_epoch())

    def eval(self, round_: int) -> dict[str, Any]:
        rounds = sorted({0, round_})
        models = stages.eval_models([(who, self.engine.url(who))
                                     for who in (student(self.config, k) for k in rounds)])
        self._run(round_, "eval", stages.eval_argv(self.config, models))
        return stages.eval_figures(stages.keep_eval(self.config, round_))

    def collect(self, round_: int) -> dict[str, Any]:
        who = student(self.config, round_ - 1)
        out = self._fresh(self.dir(round_) / "collect")
        self._run(round_, "collect", stages.collect_argv(
            self.config, who, self.engine.url(who), self.config.instances, out, self.config.samples,
            evaluate=False, seed=self.config.seed + round_))
        return {"student": who.name} | stages.rollout_figures(out)

    def pairs(self, round_: int) -> dict[str, Any]:
        out = self.dir(round_) / "pairs"
        self._run(round_, "pairs", stages.run_argv(self.config, self.dir(round_) / "collect", out,
                                                   self.config.test_split))
        return stages.pairs_figures(out, self.config.cache, self.ledger.first_epoch())

    def verify(self, round_: int) -> dict[str, Any]:
        who = student(self.config, round_ - 1)
        pairs = self.dir(round_) / "pairs"
        self._run(round_, "verify", stages.verify_argv(self.config, self.engine.url(who), pairs,
                                                       self.dir(round_) / "collect"))
        return stages.verify_figures(pairs)

    def train(self, round_: int) -> dict[str, Any]:
        trained = self._fresh(self.dir(round_) / "trained")
        parent = student(self.config, round_ - 1)
        if stages.training_rows(self.dir(round_) / "pairs") == 0:
            return self.untrained(round_, parent, trained)
        self._run(round_, "train", stages.train_argv(self.config, round_, parent, self.dir(round_) / "pairs",
                                                     trained))
        figures = stages.train_figures(trained)
        if self.config.lora_r > 0 and self.config.engine == "transformers":
            began = time.monotonic()
            merge(trained, student(self.config, 0).folder, self.dir(round_) / "student")
            figures["merge_seconds"] = round(time.monotonic() - began, 1)
        return figures


    def untrained(self, round_: int, parent: Student, trained: Path) -> dict[str, Any]:
        """The round's pairs hold no training rows (every state agreed with the teachers, as in the
        no-signal control): nothing is trained, and round K is round K-1, copied where it is served from."""
        if self.config.engine == "url" or is_hub_name(parent.folder):
            raise LoopError(f"round {round_}: its pairs hold no training rows; only --engine transformers "
                            f"or vllm with a local --student serves such a round (as round {round_ - 1})")
        if self.config.lora_r > 0:
            # vLLM serves round K as round K-1's adapter, or, with none (round 0), as round 0 under its name.
            if parent.adapter is not None:
                shutil.copytree(parent.adapter, trained, dirs_exist_ok=True)
            else:
                trained.mkdir(parents=True, exist_ok=True)
                (trained / SAME_AS_ROUND_0).write_text(f"round {round_} is round 0: no round has trained\n")
            if self.config.engine == "transformers":
                shutil.copytree(parent.folder, self._fresh(self.dir(round_) / "student"))
        else:
            shutil.copytree(parent.folder, trained, dirs_exist_ok=True)
        return {"skipped": f"no training rows: round {round_} is round {round_ - 1}", "held_out": None}


def run_loop(config: LoopConfig, on_stage: Callable[[int, str], None] | None = None) -> Ledger:
    """Run (or resume) the loop to its last round; returns the ledger. LoopError on a failed stage."""
    from replay.loop.report import write_report

    check(config)
    try:
        config.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise LoopError(f"--out {config.out}: {error.strerror}") from None
    ledger = Ledger(config.out, settings(config))
    engine = open_engine(config)
    loop = Loop(config, engine, ledger)
    try:
        for round_ in range(config.rounds + 1):
            for stage in stages.stage_names(round_, config.verify):
                if ledger.done(round_, stage) is not None:
                    continue
                if on_stage is not None:
                    on_stage(round_, stage)
                began = ledger.start(round_, stage)
                ledger.finish(round_, stage, began, loop.stages[stage](round_))
            ledger.set_round(round_, "student", student(config, round_).model_dump())
            write_report(ledger, config.out)
    finally:
        engine.close()
    return ledger


def settings(config: LoopConfig) -> dict[str, Any]:
    """What loop.json records of the config (what a resume must not change; see ledger.RESUMABLE)."""
    return config.model_dump(mode="json", exclude={"command"}) | {"command": config.command}
