"""KTO with LoRA on a `python -m replay.run --format kto` dataset.

    python examples/train_kto.py --dataset replay-out --model Qwen/Qwen3-8B

Rows are TRL's unpaired preference format: `prompt`, one assistant `completion`, `label` (true: the
teachers' consensus; false: a student action that failed), `tools` beside them, rendered by the
student's own chat template. KTO estimates its KL term from the other completions of a batch, so the
batch holds more than one row. Desirable and undesirable rows are weighed so that their shares count
alike (TRL recommends desirable_weight * desirable rows ≈ undesirable_weight * undesirable rows, within
1 to 4/3); with no undesirable row (no recorded failures), the weights stay 1.
"""

from __future__ import annotations

from train_common import common_args, finish, load_rows, lora, max_length, parser, student


def weights(labels: list[bool]) -> dict[str, float]:
    """desirable_weight / undesirable_weight that balance the two kinds of rows."""
    desirable, undesirable = sum(labels), len(labels) - sum(labels)
    if not desirable or not undesirable:
        return {"desirable_weight": 1.0, "undesirable_weight": 1.0}
    if desirable >= undesirable:
        return {"desirable_weight": 1.0, "undesirable_weight": desirable / undesirable}
    return {"desirable_weight": undesirable / desirable, "undesirable_weight": 1.0}


def main(argv: list[str] | None = None):
    from trl import KTOConfig, KTOTrainer

    args = parser("kto").parse_args(argv)
    dataset = load_rows(args.dataset, "kto", args.template)
    model, tokenizer = student(args.model)
    peft = lora(args.lora_r)
    reference = None if peft is not None else student(args.model)[0]
    config = KTOConfig(**common_args(args, max_length(args.dataset, args.max_length)),
                       **weights(dataset["label"]))
    trainer = KTOTrainer(model=model, ref_model=reference, args=config, train_dataset=dataset,
                         processing_class=tokenizer, peft_config=peft)
    return finish(trainer, args.output)


if __name__ == "__main__":
    main()
