"""The loop's settings: what `python -m replay.loop` was given, checked before any stage starts."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Literal

from pydantic import Field

from ingestion.schema import ReplayError, StrictModel

ENGINES = ("transformers", "vllm", "url")


class LoopError(ReplayError):
    """A mistake in the loop's input, or a stage that failed: one line (exit 2 before any stage ran)."""


class LoopConfig(StrictModel):
    instances: Path                          # training instances (SWE-bench rows): collected every round
    held_out: Path                           # held-out instances: resolve rate, and replay.eval's states
    student: str                             # round 0: a model folder or a Hub name
    teachers: str                            # the pool, as replay.run --teachers takes it
    out: Path
    rounds: int = Field(default=1, ge=1)
    engine: Literal["transformers", "vllm", "url"] = "transformers"
    url: str | None = None                   # engine url: the user's OpenAI-compatible server (vLLM)
    served_name: str | None = None           # engine url: the name the server serves round 0 under
    device: str = "auto"                     # transformers serve --device
    format: Literal["dpo", "kto", "sft"] = "dpo"
    verify: bool = False                     # replay.verify each round's pairs before training
    samples: int = Field(default=1, ge=1)    # rollouts per training instance and round
    held_out_samples: int = Field(default=1, ge=1)
    max_turns: int = Field(default=10, ge=1)
    max_tokens: int | None = None            # completion tokens per student turn
    temperature: float | None = None         # the student's sampling in rollouts (default: the server's)
    seed: int = 0
    test_split: float = 0.2                  # replay.run --test-split: held_out.json's pairs
    max_steps: int = -1
    epochs: float = 1.0
    batch_size: int = 2
    learning_rate: float | None = None
    lora_r: int = 16
    max_length: int | None = None            # replay.run --max-length and the trainer's
    cpu: bool = False
    collect_args: str = ""                   # more flags for collect.run (both collections)
    run_args: str = ""                       # more flags for replay.run
    train_args: str = ""                     # more flags for python -m replay.train
    vllm_args: str = ""                      # more flags for vllm serve (engine vllm)
    vllm_python: str | None = None           # engine vllm: the interpreter of vLLM's environment
    command: str = ""

    def extra(self, which: str) -> list[str]:
        return shlex.split(getattr(self, f"{which}_args"))

    @property
    def cache(self) -> Path:
        """One teacher cache for every replay.run and replay.eval of the loop: a stage redone after a kill
        asks no teacher twice."""
        return self.out / "teacher-cache.sqlite"

    @property
    def heldout_run(self) -> Path:
        """replay.run over round 0's held-out rollouts: the states and consensus every round is judged at."""
        return self.out / "heldout-run"
