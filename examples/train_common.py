"""What the three training examples share: the dataset a `replay.run --out` folder holds, the student's
own tokenizer and chat template, LoRA, and the flags. See train_dpo.py, train_kto.py, train_sft.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

# The columns that tell the formats apart (replay/export/formats.py).
FORMAT_COLUMNS = {"dpo": "rejected", "kto": "label", "sft": "completion"}


def parser(fmt: str) -> argparse.ArgumentParser:
    trainer = {"dpo": "DPOTrainer", "kto": "KTOTrainer", "sft": "SFTTrainer"}[fmt]
    out = argparse.ArgumentParser(
        description=f"Train the student with TRL's {trainer} and LoRA on a `replay.run --format {fmt}` "
                    "dataset, on the student's own chat template.")
    out.add_argument("--dataset", type=Path, required=True,
                     help="the replay.run --out folder (or its dataset/ folder)")
    out.add_argument("--model", required=True,
                     help="the student: a Hub name or a local folder (its tokenizer and chat template are "
                          "used as they are)")
    out.add_argument("--output", type=Path, default=Path(f"{fmt}-lora"), help="where the adapter is saved")
    out.add_argument("--max-steps", type=int, default=-1, help="stop after N steps (default: one epoch)")
    out.add_argument("--max-length", type=int, default=None,
                     help="tokens per sequence (default: the dataset card's, else 8192)")
    out.add_argument("--batch-size", type=int, default=2, help="per device (KTO needs more than 1)")
    out.add_argument("--learning-rate", type=float, default=1e-5 if fmt != "sft" else 1e-4)
    out.add_argument("--lora-r", type=int, default=16, help="LoRA rank (0: full fine-tuning)")
    out.add_argument("--template", metavar="NAME", default=None,
                     help="keep only the rows this --preflight-template renders cleanly")
    out.add_argument("--cpu", action="store_true", help="train on the CPU (float32)")
    return out


def load_rows(folder: Path, fmt: str, template: str | None = None) -> Any:
    """The train split of the dataset under `folder`; one clear line if it is another format."""
    from datasets import DatasetDict, load_from_disk

    path = folder / "dataset" if (folder / "dataset").is_dir() else folder
    dataset = load_from_disk(str(path))
    if isinstance(dataset, DatasetDict):
        dataset = dataset["train"]
    if FORMAT_COLUMNS[fmt] not in dataset.column_names:
        found = next((name for name, column in FORMAT_COLUMNS.items() if column in dataset.column_names), "?")
        sys.exit(f"error: {path} is a --format {found} dataset; this example trains --format {fmt}")
    if template is not None:
        dataset = dataset.filter(lambda row: not row["preflight"].get(template, ["not checked"]))
    return dataset


def max_length(folder: Path, given: int | None) -> int:
    """--max-length, else the `max_length=N` the dataset card recommends, else 8192."""
    import re

    card = folder / "README.md"
    found = re.search(r"max_length=(\d+)", card.read_text(encoding="utf-8")) if card.is_file() else None
    return given or (int(found.group(1)) if found else 8192)


def student(name: str) -> tuple[Any, Any]:
    """The student's model and tokenizer; its own chat template renders `tools` and tool calls."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name)
    if not tokenizer.chat_template:
        sys.exit(f"error: {name} has no chat template; train with the tokenizer the student runs with")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(name), tokenizer


def lora(rank: int) -> Any:
    """LoRA on every linear layer (None for full fine-tuning: then DPO and KTO load a reference model)."""
    if rank <= 0:
        return None
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")


def common_args(args: argparse.Namespace, length: int) -> dict[str, Any]:
    """Config arguments every trainer takes alike."""
    return {"output_dir": str(args.output), "max_steps": args.max_steps, "max_length": length,
            "per_device_train_batch_size": args.batch_size, "learning_rate": args.learning_rate,
            "logging_steps": 1, "save_strategy": "no", "report_to": [], "use_cpu": args.cpu,
            "bf16": not args.cpu}


def finish(trainer: Any, output: Path) -> Any:
    """Train, save the adapter (or model) and tokenizer, return the trainer."""
    trainer.train()
    trainer.save_model(str(output))
    return trainer
