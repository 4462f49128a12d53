"""SFT with LoRA on a `python -m replay.run --format sft` dataset.

    python examples/train_sft.py --dataset replay-out --model Qwen/Qwen3-8B

Rows are TRL's conversational prompt-completion format: `prompt`, one assistant `completion` (the
teachers' consensus), `tools` beside them, rendered by the student's own chat template. SFTTrainer
computes the loss on the completion only (`completion_only_loss`, its default for prompt-completion
rows), so the student's own earlier turns in the prompt are context, never targets.
"""

from __future__ import annotations

from train_common import common_args, finish, load_rows, lora, max_length, parser, student


def main(argv: list[str] | None = None):
    from trl import SFTConfig, SFTTrainer

    args = parser("sft").parse_args(argv)
    dataset = load_rows(args.dataset, "sft", args.template)
    model, tokenizer = student(args.model)
    config = SFTConfig(**common_args(args, max_length(args.dataset, args.max_length)))
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=lora(args.lora_r))
    return finish(trainer, args.output)


if __name__ == "__main__":
    main()
