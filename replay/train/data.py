"""What training reads: the settings (`TrainOptions`) and a `replay.run --out` folder's dataset.

A run folder holds the dataset (`dataset/`, with `train` and `test` splits after `--test-split`), its
card (`README.md`, which names the `max_length` the rows were fitted to) and the states the yardsticks
are built from (`states.jsonl`); a `dataset/` folder given alone is read too, without a recovery set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ingestion.schema import ReplayError, StrictModel

# The columns that tell the formats apart (replay/export/formats.py).
FORMAT_COLUMNS = {"dpo": "rejected", "kto": "label", "sft": "completion"}
DEFAULT_LENGTH = 8192


class TrainError(ReplayError):
    """A dataset or setting training cannot use (another format, no rows, no chat template)."""


class TrainOptions(StrictModel):
    """One student trained on one dataset; every field has the examples' flag of the same name."""

    dataset: Path                            # the replay.run --out folder, or its dataset/ folder
    model: str                               # the student: a Hub name or a local folder
    adapter: Path | None = None              # a LoRA adapter of `model` to train on (replay.loop's rounds)
    format: Literal["dpo", "kto", "sft"] = "dpo"
    output: Path = Path("dpo-lora")          # the adapter (or model) and held_out.json
    max_steps: int = -1                      # -1: `epochs` epochs
    epochs: float = 1.0
    max_length: int | None = None            # None: the dataset card's, else 8192
    batch_size: int = 2
    learning_rate: float | None = None       # None: 1e-5 (DPO), 4e-5 (KTO), 1e-4 (SFT)
    beta: float = 0.1                        # DPO / KTO
    lora_r: int = 16                         # 0: full fine-tuning, a frozen copy as the reference
    template: str | None = None              # keep the rows this --preflight-template renders cleanly
    cpu: bool = False                        # also when no CUDA device is present
    seed: int = 0
    evaluate: bool = True                    # held-out figures before and after (with a test split)
    eval_batch_size: int | None = None       # None: batch_size

    @property
    def rate(self) -> float:
        if self.learning_rate is not None:
            return self.learning_rate
        # KTO moves the student about a quarter as far per step as DPO at the same rate (README,
        # "Judging data by the student"): its default is four times DPO's.
        return {"dpo": 1e-5, "kto": 4e-5, "sft": 1e-4}[self.format]


@dataclass
class Rows:
    """A dataset's splits; `run` is the run folder when there is one (states.jsonl beside)."""

    train: Any                   # datasets.Dataset
    test: Any | None             # datasets.Dataset, None without a test split
    run: Path | None
    max_length: int


def load_rows(options: TrainOptions) -> Rows:
    """The train (and test) split of `options.dataset`; one clear error if it is another format."""
    from datasets import DatasetDict, load_from_disk

    given = options.dataset
    folder, path = (given, given / "dataset") if (given / "dataset").is_dir() else (given.parent, given)
    if not path.is_dir():
        raise TrainError(f"{given} is neither a replay.run --out folder nor a dataset folder")
    dataset = load_from_disk(str(path))
    split = isinstance(dataset, DatasetDict)
    train, test = (dataset["train"], dataset.get("test")) if split else (dataset, None)
    fmt = options.format
    if FORMAT_COLUMNS[fmt] not in train.column_names:
        found = next((name for name, column in FORMAT_COLUMNS.items() if column in train.column_names), "?")
        raise TrainError(f"{path} is a --format {found} dataset; this trains --format {fmt}")
    if options.template is not None:
        train, test = (_templated(split, options.template) for split in (train, test))
    if train.num_rows == 0:
        raise TrainError(f"{path} has no training rows" + (f" that {options.template} renders cleanly"
                                                           if options.template else ""))
    run = folder if (folder / "states.jsonl").is_file() else None
    return Rows(train, test if test is not None and test.num_rows else None, run,
                options.max_length or card_length(folder))


def _templated(split: Any, template: str) -> Any:
    if split is None:
        return None
    return split.filter(lambda row: not row["preflight"].get(template, ["not checked"]))


def card_length(folder: Path) -> int:
    """The `max_length=N` the dataset card recommends, else 8192.

    >>> card_length(Path("/nonexistent"))
    8192
    """
    card = folder / "README.md"
    found = re.search(r"max_length=(\d+)", card.read_text(encoding="utf-8")) if card.is_file() else None
    return int(found.group(1)) if found else DEFAULT_LENGTH
