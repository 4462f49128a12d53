"""DPO with LoRA on a `python -m replay.run --format dpo` dataset (the default format).

    python examples/train_dpo.py --dataset replay-out --model Qwen/Qwen3-8B

The rows load into TRL's DPOTrainer as they are: `prompt`, `chosen`, `rejected` in the conversational
format, `tools` beside them, rendered by the student's own chat template. With LoRA the reference model
is the student with the adapter switched off; with --lora-r 0 a frozen copy is loaded as the reference.
With a test split the student is judged before and after training (replay/train/): held_out.json.
"""

from replay.train.cli import main as train


def main(argv: list[str] | None = None):
    return train("dpo", argv)


if __name__ == "__main__":
    main()
