"""KTO with LoRA on a `python -m replay.run --format kto` dataset.

    python examples/train_kto.py --dataset replay-out --model Qwen/Qwen3-8B

Rows are TRL's unpaired preference format: `prompt`, one assistant `completion`, `label` (true: the
teachers' consensus; false: a student action that failed), `tools` beside them, rendered by the
student's own chat template. Desirable and undesirable rows are weighed so that their shares count
alike (TRL recommends desirable_weight × desirable rows ≈ undesirable_weight × undesirable rows); with
no undesirable row (no recorded failures) the weights stay 1. With a test split the student is judged
on the same held-out pairs as DPO's (replay/train/): held_out.json.
"""

from replay.train.cli import main as train


def main(argv: list[str] | None = None):
    return train("kto", argv)


if __name__ == "__main__":
    main()
