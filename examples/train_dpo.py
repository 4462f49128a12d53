"""DPO with LoRA on a `python -m replay.run --format dpo` dataset (the default format).

    python examples/train_dpo.py --dataset replay-out --model Qwen/Qwen3-8B

The rows load into TRL's DPOTrainer as they are: `prompt`, `chosen`, `rejected` in the conversational
format, `tools` beside them, rendered by the student's own chat template. With LoRA the reference model
is the student with the adapter switched off; with --lora-r 0 a frozen copy is loaded as the reference.
"""

from __future__ import annotations

from train_common import common_args, finish, load_rows, lora, max_length, parser, student


def main(argv: list[str] | None = None):
    from trl import DPOConfig, DPOTrainer

    args = parser("dpo").parse_args(argv)
    dataset = load_rows(args.dataset, "dpo", args.template)
    model, tokenizer = student(args.model)
    peft = lora(args.lora_r)
    reference = None if peft is not None else student(args.model)[0]
    config = DPOConfig(**common_args(args, max_length(args.dataset, args.max_length)))
    trainer = DPOTrainer(model=model, ref_model=reference, args=config, train_dataset=dataset,
                         processing_class=tokenizer, peft_config=peft)
    return finish(trainer, args.output)


if __name__ == "__main__":
    main()
