"""Issue #36's scenario trained on a GPU in bf16: the held-out figures of DPO, KTO and SFT before and after.

One script, two steps, because the GPU machine holds only torch, transformers, peft, accelerate (and the
trl / datasets wheels carried to it), not the project's own dependencies (litellm, pydantic, ...):

1. `prepare`, on any machine with the project installed (CPU is enough, about a minute): the scenario of
   tests/student_scenario.py — teachers that run `pytest -q` and read before editing, a student that
   runs `python -m unittest` and edits unread files — through the real `python -m replay.run` against
   loopback teachers (tests/llm_server.py), with `--test-split 0.4 --match exact`, in each format; then
   the run's datasets, the yardsticks (the held-out pairs and the recovery set, replay.train.heldout)
   as JSON lines, and a byte-level BPE trained on the run's own texts (tests/tiny_model.py), into OUT:

       python bench/train_gpu.py prepare --out .judge

2. `train`, on the GPU: a Llama built from a config (random weights, nothing downloaded; about 25M
   parameters, `--tiny` for a 2-layer one), trained from the same initial weights with DPO, KTO and SFT
   on the train split (full fine-tuning, a frozen copy as DPO's and KTO's reference, bf16 on CUDA), each
   judged before and after on the same held-out pairs and recovery set, as replay.train judges them
   (replay/train/scoring.py: log-likelihoods tokenized as DPOTrainer does). Prints a table, writes
   OUT/results.json:

       python bench/train_gpu.py train --data .judge              # GPU, bf16
       python bench/train_gpu.py train --data .judge --cpu --tiny # the same on CPU, a 2-layer model

accuracy: the share of pairs whose log-odds of chosen over rejected rose above the untrained model's
(TRL's rewards/accuracies; the untrained model scores 0.00, every pair a tie); margin: the mean rise, in
nats; likelihood: the share where the model itself gives the chosen answer the higher log-likelihood.
[95% Wilson intervals]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FORMATS = ("dpo", "kto", "sft")
STICKS = ("held_out_pairs", "recovery_set")


def prepare(out: Path, episodes: int) -> None:
    """The scenario through replay.run (three formats, one set of teacher answers), then plain files."""
    import os
    import tempfile

    from datasets import load_from_disk

    from ingestion.store import load_states
    from replay.run import main as run_main
    from replay.train.heldout import yardsticks
    from tests import student_scenario as scenario
    from tests.llm_server import LLMServer
    from tests.tiny_model import build_tokenizer, trace_corpus

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work, LLMServer(scenario.respond) as server:
        source = scenario.write_sessions(Path(work) / "src", episodes)
        for fmt in FORMATS:
            run = Path(work) / fmt
            code = run_main(["--source", str(source), "--out", str(run), "--teachers",
                             scenario.pool(server.url, *scenario.TEACHERS), "--cache", f"{work}/cache.sqlite",
                             "--match", "exact", "--test-split", "0.4", "--format", fmt])
            if code != 0:
                sys.exit(f"replay.run --format {fmt} failed ({code})")
            load_from_disk(str(run / "dataset")).save_to_disk(str(out / fmt))
        run = Path(work) / "dpo"
        sticks = yardsticks(run, load_from_disk(str(run / "dataset"))["test"].to_list())
        for name, pairs in sticks.items():
            with open(out / f"{name}.jsonl", "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps(pair) + "\n" for pair in pairs)
        build_tokenizer(out / "tokenizer", trace_corpus(load_states(run)), vocab_size=2000, across_words=True)
    print(f"prepared {out}: " + ", ".join(f"{name} {len(pairs)} pairs" for name, pairs in sticks.items()))


def build_model(data: Path, folder: Path, tiny: bool) -> Path:
    """A Llama from a config, sized to the tokenizer, saved once so every format starts from it."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(data / "tokenizer"))
    size = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2) if tiny else dict(hidden_size=512, intermediate_size=1536,
                                                          num_hidden_layers=8, num_attention_heads=8,
                                                          num_key_value_heads=4)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), max_position_embeddings=4096,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None, **size)
    LlamaForCausalLM(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def figures(policy: list, reference: list) -> dict[str, Any]:
    """accuracy (margin > 0, TRL's rewards/accuracies), ties, mean margin, likelihood accuracy."""
    from replay.train.wilson import wilson

    scores = [(p, r) for p, r in zip(policy, reference, strict=True) if p is not None and r is not None]
    n = len(scores)
    margins = [(p[0] - r[0]) - (p[1] - r[1]) for p, r in scores]
    won, liked = sum(m > 0 for m in margins), sum(p[0] > p[1] for p, _ in scores)
    return {"pairs": n, "accuracy": round(won / n, 4) if n else None, "interval": wilson(won, n),
            "ties": sum(m == 0 for m in margins), "margin": round(sum(margins) / n, 4) if n else None,
            "likelihood": round(liked / n, 4) if n else None, "likelihood_interval": wilson(liked, n)}


def one_format(fmt: str, data: Path, model_dir: Path, args: argparse.Namespace,
               sticks: dict[str, list]) -> dict[str, Any]:
    import torch
    from datasets import load_from_disk
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer, KTOConfig, KTOTrainer, SFTConfig, SFTTrainer

    from replay.train.scoring import score_pairs

    dtype = torch.float32 if args.cpu else torch.bfloat16
    device = "cpu" if args.cpu else "cuda"

    def load() -> Any:
        return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype).to(device)

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    dataset = load_from_disk(str(data / fmt))
    model = load().eval()
    before = {name: score_pairs(model, tokenizer, pairs, args.max_length, 8)[0]
              for name, pairs in sticks.items()}
    common = dict(output_dir=str(args.out / fmt), num_train_epochs=args.epochs, max_length=args.max_length,
                  per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=args.batch_size,
                  learning_rate=args.learning_rate, logging_steps=10, save_strategy="no", report_to=[],
                  use_cpu=args.cpu, bf16=not args.cpu, seed=0, data_seed=0, disable_tqdm=True)
    if fmt == "sft":
        trainer = SFTTrainer(model=model, args=SFTConfig(**common), train_dataset=dataset["train"],
                             eval_dataset=dataset["test"], processing_class=tokenizer)
    else:
        labels = dataset["train"]["label"] if fmt == "kto" else []
        # KTO: the undesirable rows weigh as much as the desirable ones, as TRL recommends
        weight = {"undesirable_weight": sum(labels) / max(1, len(labels) - sum(labels))} if labels else {}
        config = (DPOConfig if fmt == "dpo" else KTOConfig)(**common, beta=0.1, **weight)
        trainer = (DPOTrainer if fmt == "dpo" else KTOTrainer)(
            model=model, ref_model=load(), args=config, train_dataset=dataset["train"],
            eval_dataset=dataset["test"], processing_class=tokenizer)
    trl_before = trainer.evaluate()
    started = time.monotonic()
    trainer.train()
    seconds = time.monotonic() - started
    trl_after = trainer.evaluate()
    trained = trainer.model.eval()
    keep = ("eval_loss", "eval_rewards/accuracies", "eval_rewards/margins", "eval_kl")
    return {"format": fmt, "rows": dataset["train"].num_rows, "steps": trainer.state.global_step,
            "train_seconds": round(seconds, 1),
            "losses": [round(log["loss"], 4) for log in trainer.state.log_history if "loss" in log],
            "trl_before": {k: round(v, 4) for k, v in trl_before.items() if k in keep},
            "trl_after": {k: round(v, 4) for k, v in trl_after.items() if k in keep},
            "before": {name: figures(got, got) for name, got in before.items()},
            "after": {name: figures(score_pairs(trained, tokenizer, sticks[name], args.max_length, 8)[0],
                                    before[name]) for name in sticks}}


def _cell(f: dict[str, Any], key: str = "accuracy", interval: str = "interval") -> str:
    if f[key] is None:
        return "n/a"
    low, high = f[interval] or (0, 0)
    return f"{f[key]:.2f} [{low:.2f}, {high:.2f}]"


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| format | yardstick | pairs | accuracy before | accuracy after | margin after (nats) | "
             "likelihood before | likelihood after |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for result in results:
        for name in STICKS:
            b, a = result["before"][name], result["after"][name]
            lines.append(f"| {result['format']} | {name} | {a['pairs']} | {_cell(b)} | {_cell(a)} | "
                         f"{a['margin']:.3f} | {_cell(b, 'likelihood', 'likelihood_interval')} | "
                         f"{_cell(a, 'likelihood', 'likelihood_interval')} |")
    lines += ["", "| format | rows | steps | seconds | TRL eval before | TRL eval after |",
              "|---|---:|---:|---:|---|---|"]
    lines += [f"| {r['format']} | {r['rows']} | {r['steps']} | {r['train_seconds']} | {r['trl_before']} | "
              f"{r['trl_after']} |" for r in results]
    return "\n".join(lines)


def train(args: argparse.Namespace) -> None:
    import torch

    if not args.cpu and not torch.cuda.is_available():
        sys.exit("no CUDA device: pass --cpu (with --tiny) to run this on the CPU")
    args.out = args.out or args.data / "out"
    args.out.mkdir(parents=True, exist_ok=True)
    sticks = {name: [json.loads(line) for line in (args.data / f"{name}.jsonl").read_text().splitlines()]
              for name in STICKS}
    model_dir = build_model(args.data, args.out / "initial", args.tiny)
    device = "CPU, float32" if args.cpu else f"{torch.cuda.get_device_name()}, bf16"
    results = [one_format(fmt, args.data, model_dir, args, sticks) for fmt in args.formats.split(",")]
    text = table(results)
    (args.out / "results.json").write_text(json.dumps({"device": device, "results": results}, indent=2))
    print(f"\n{'tiny' if args.tiny else 'small'} Llama from a config on {device}; {args.epochs:g} epochs, "
          f"learning rate {args.learning_rate:g}, batch {args.batch_size}\n\n{text}\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python bench/train_gpu.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    ready = steps.add_parser("prepare", help="build the scenario run (needs the project installed)")
    ready.add_argument("--out", type=Path, required=True)
    ready.add_argument("--episodes", type=int, default=24, help="sessions, at most 24 (24)")
    fit = steps.add_parser("train", help="train and judge (torch, transformers, peft, trl, datasets)")
    fit.add_argument("--data", type=Path, required=True, help="the folder `prepare` wrote")
    fit.add_argument("--out", type=Path, default=None, help="results (default: DATA/out)")
    fit.add_argument("--formats", default="dpo,kto,sft")
    fit.add_argument("--epochs", type=float, default=2.0)
    fit.add_argument("--learning-rate", type=float, default=5e-4)
    fit.add_argument("--batch-size", type=int, default=4)
    fit.add_argument("--max-length", type=int, default=1024)
    fit.add_argument("--cpu", action="store_true", help="float32 on the CPU")
    fit.add_argument("--tiny", action="store_true", help="a 2-layer, 32-wide model (CPU checks)")
    args = parser.parse_args(argv)
    prepare(args.out, args.episodes) if args.step == "prepare" else train(args)


if __name__ == "__main__":
    main()
