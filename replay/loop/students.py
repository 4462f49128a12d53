"""Each round's student: where its weights are and the name it is served under; the trained adapter merged
into a model folder the next round starts from.

Round K's student is round K-1's trained on round K's pairs, the reference of DPO/KTO being round K-1 (as
in iterative DPO). With LoRA (the default) every round trains one adapter of round 0's model further
(`python -m replay.train --adapter`), so each round is round 0 plus an adapter: vLLM serves them all from
one process (`--lora-modules round-1=… round-2=…`, as vLLM documents adapters; round 0 is the base), a
vLLM the user runs loads each by its runtime route, and `transformers serve` serves the adapter merged
into a full folder (`round-K/student`). With full fine-tuning (`--lora-r 0`) round K is a full folder
trained from round K-1's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pydantic import BaseModel

from replay.loop.config import LoopError


class Student(BaseModel):
    round: int
    folder: str               # full weights: a local folder, or round 0's Hub name
    name: str                 # the model name requests carry (transformers: the folder itself)
    adapter: str | None = None   # round K's LoRA adapter of round 0's model (None: round 0, or --lora-r 0)
    untrained: bool = False      # a round with no training rows while no round had trained: round 0's weights


def is_hub_name(text: str) -> bool:
    """`org/name` and nothing that reads as a path.

    >>> is_hub_name("HuggingFaceTB/SmolLM2-135M-Instruct"), is_hub_name("./model"), is_hub_name("/m/x")
    (True, False, False)
    """
    return text.count("/") == 1 and not text.startswith((".", "/", "~")) and not Path(text).exists()


def check_student(student: str) -> None:
    """A folder must hold a model (config.json) and a tokenizer with a chat template: one line otherwise."""
    if is_hub_name(student):
        return
    folder = Path(student).expanduser()
    if not folder.is_dir():
        raise LoopError(f"--student {student}: no such folder (give a model folder or a Hub name org/name)")
    if not (folder / "config.json").is_file():
        raise LoopError(f"--student {student}: not a model folder (no config.json); for GGUF weights "
                        f"make one first (examples/make_smollm2.py shows how)")
    if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise LoopError(f"--student {student}: no tokenizer in the folder (save the tokenizer beside "
                        f"the model)")


def merge(trained: Path, parent: str, out: Path) -> Path:
    """The trainer's output (a LoRA adapter of `parent`, round 0's model; or a whole model) as one model
    folder `out`, with the parent's tokenizer (chat template and response template included). Written
    beside and renamed, so `out` is whole or absent."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    temp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(temp, ignore_errors=True)
    if (trained / "adapter_config.json").is_file():
        from peft import PeftModel

        model = AutoModelForCausalLM.from_pretrained(parent, dtype="auto")
        model = PeftModel.from_pretrained(model, str(trained)).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(str(trained), dtype="auto")
    model.save_pretrained(str(temp))
    AutoTokenizer.from_pretrained(parent).save_pretrained(str(temp))
    _copy_generation_config(parent, temp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(temp, out)
    return out


def _copy_generation_config(parent: str, folder: Path) -> None:
    # The parent's sampling defaults (generation_config.json) stay the student's own.
    source = Path(parent) / "generation_config.json"
    if source.is_file():
        shutil.copyfile(source, folder / "generation_config.json")
