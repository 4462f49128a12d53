"""End to end on CPU: pairs → export_dataset → load_from_disk → pre-flight → trl.DPOTrainer, 2 steps.

The exported dataset goes into DPOTrainer as loaded, with no conversion: TRL 1.16 passes the `tools`
column and each message (tool calls included) straight to `apply_chat_template`.
"""

from __future__ import annotations

import math

from replay.export import export_dataset
from replay.preflight import preflight
from tests.test_export import pair_rows
from tests.tiny_model import build_tiny


def test_dpo_trains_on_the_exported_dataset(tmp_path):
    import torch
    from datasets import load_from_disk
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    torch.manual_seed(0)
    tiny = build_tiny(tmp_path / "tiny")
    export_dataset(pair_rows(), tmp_path / "out")
    dataset = load_from_disk(str(tmp_path / "out" / "dataset"))
    tokenizer = AutoTokenizer.from_pretrained(str(tiny))

    # Tool arguments come back as objects and render as JSON objects in prompt, chosen and rejected.
    row = dataset[0]
    assert isinstance(row["tools"][0], dict)
    text = tokenizer.apply_chat_template(row["prompt"] + row["chosen"], tools=row["tools"], tokenize=False)
    assert '"arguments": {"command": "pytest -q", "description": "Run tests"}' in text
    assert '"arguments": {"file_path": "tests/test_a.py"}' in text
    assert '"arguments": {"command": "rm -rf build", "timeout": 600}' in tokenizer.apply_chat_template(
        row["prompt"] + row["rejected"], tools=row["tools"], tokenize=False)

    kept, dropped = preflight(dataset, str(tiny), max_length=2048)
    assert len(kept) == dataset.num_rows and not dropped

    args = DPOConfig(output_dir=str(tmp_path / "run"), bf16=False, use_cpu=True, max_steps=2,
                     per_device_train_batch_size=2, report_to=[], logging_steps=1, save_strategy="no",
                     max_length=2048, seed=0, disable_tqdm=True)
    trainer = DPOTrainer(model=AutoModelForCausalLM.from_pretrained(str(tiny)),
                         ref_model=AutoModelForCausalLM.from_pretrained(str(tiny)),
                         args=args, train_dataset=dataset, processing_class=tokenizer)
    output = trainer.train()

    assert trainer.state.global_step == 2
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    assert math.isfinite(output.training_loss)
