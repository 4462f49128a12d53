"""The student and its TRL trainer for each format: DPOTrainer, KTOTrainer or SFTTrainer, LoRA (peft)
on every linear layer, the student's own tokenizer and chat template.

The reference of DPO and KTO is the untrained student: with LoRA the student with its adapter switched
off (TRL's default), with full fine-tuning a frozen copy loaded beside it. With `adapter` (a LoRA adapter
of the student trained before, as `replay.loop`'s later rounds give) that adapter goes on training and the
reference is a frozen copy of the student with the adapter as it was: the policy of the round before, as
iterative DPO has it. On a machine without CUDA
(or with `cpu`) training runs on the CPU in float32, else in bfloat16.
"""

from __future__ import annotations

from typing import Any

from replay.train.data import TrainError, TrainOptions

TRAINERS = {"dpo": "DPOTrainer", "kto": "KTOTrainer", "sft": "SFTTrainer"}


def on_cpu(options: TrainOptions) -> bool:
    import torch

    return options.cpu or not torch.cuda.is_available()


def load_student(options: TrainOptions) -> tuple[Any, Any]:
    """The student's model and tokenizer; its own chat template renders `tools` and tool calls."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(options.model)
    if not tokenizer.chat_template:
        raise TrainError(f"{options.model} has no chat template; train with the tokenizer the student "
                         f"runs with")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return _model(options), tokenizer


def _model(options: TrainOptions, trainable: bool = True) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.float32 if on_cpu(options) else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(options.model, dtype=dtype)
    if options.adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(options.adapter), is_trainable=trainable)
        if not trainable:   # the reference: a plain model (TRL's fused forward unwraps no PeftModel)
            model = model.merge_and_unload()
    return model if on_cpu(options) else model.to("cuda")


def lora(rank: int) -> Any:
    """LoRA on every linear layer (None for full fine-tuning).

    >>> lora(0) is None
    True
    """
    if rank <= 0:
        return None
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")


def kto_weights(labels: list[bool]) -> dict[str, float]:
    """desirable_weight / undesirable_weight that make the two kinds of rows weigh alike (TRL
    recommends desirable_weight × desirable rows ≈ undesirable_weight × undesirable rows).

    >>> kto_weights([True, True, True, False])
    {'desirable_weight': 1.0, 'undesirable_weight': 3.0}
    >>> kto_weights([True, True])
    {'desirable_weight': 1.0, 'undesirable_weight': 1.0}
    """
    desirable, undesirable = sum(labels), len(labels) - sum(labels)
    if not desirable or not undesirable:
        return {"desirable_weight": 1.0, "undesirable_weight": 1.0}
    if desirable >= undesirable:
        return {"desirable_weight": 1.0, "undesirable_weight": desirable / undesirable}
    return {"desirable_weight": undesirable / desirable, "undesirable_weight": 1.0}


def config(options: TrainOptions, max_length: int, train: Any) -> Any:
    """The trainer's config: the same settings for every format, plus DPO's and KTO's `beta` and
    KTO's weights from `train`'s labels."""
    from trl import DPOConfig, KTOConfig, SFTConfig

    cpu = on_cpu(options)
    common = {"output_dir": str(options.output), "max_steps": options.max_steps,
              "num_train_epochs": options.epochs, "max_length": max_length,
              "per_device_train_batch_size": options.batch_size,
              "per_device_eval_batch_size": options.eval_batch_size or options.batch_size,
              "learning_rate": options.rate, "logging_steps": 1, "save_strategy": "no", "report_to": [],
              "use_cpu": cpu, "bf16": not cpu, "seed": options.seed, "data_seed": options.seed}
    if options.format == "dpo":
        return DPOConfig(**common, beta=options.beta)
    if options.format == "kto":
        return KTOConfig(**common, beta=options.beta, **kto_weights(train["label"]))
    return SFTConfig(**common)


def build_trainer(options: TrainOptions, model: Any, tokenizer: Any, train: Any, test: Any | None,
                  max_length: int) -> Any:
    """The format's TRL trainer over `train` (and `test` as its eval set)."""
    from trl import DPOTrainer, KTOTrainer, SFTTrainer

    args = config(options, max_length, train)
    peft = lora(options.lora_r) if options.adapter is None else None   # an adapter given: it is the LoRA
    if options.format == "sft":
        return SFTTrainer(model=model, args=args, train_dataset=train, eval_dataset=test,
                          processing_class=tokenizer, peft_config=peft)
    reference = None if peft is not None else _model(options, trainable=False)
    trainer = DPOTrainer if options.format == "dpo" else KTOTrainer
    return trainer(model=model, ref_model=reference, args=args, train_dataset=train, eval_dataset=test,
                   processing_class=tokenizer, peft_config=peft)
