"""SFT with LoRA on a `python -m replay.run --format sft` dataset.

    python examples/train_sft.py --dataset replay-out --model Qwen/Qwen3-8B

Rows are TRL's conversational prompt-completion format: `prompt`, one assistant `completion` (the
teachers' consensus), `tools` beside them, rendered by the student's own chat template. SFTTrainer
computes the loss on the completion only (`completion_only_loss`, its default for prompt-completion
rows), so the student's own earlier turns in the prompt are context, never targets. With a test split
the student is judged on the same held-out pairs as DPO's (replay/train/): held_out.json.
"""

from replay.train.cli import main as train


def main(argv: list[str] | None = None):
    return train("sft", argv)


if __name__ == "__main__":
    main()
