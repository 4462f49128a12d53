"""A tiny tool-calling tokenizer and causal LM, built offline in seconds for the TRL tests.

Nothing is downloaded: a byte-level BPE is trained on a few lines of agent-like text (byte-level,
so any text still encodes), wrapped as a fast tokenizer with a ChatML-style template that renders
`tools` and assistant `tool_calls`, and saved beside a randomly initialised 2-layer Llama.
"""

from __future__ import annotations

from pathlib import Path

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"

# Tool-call arguments render as JSON objects whether they arrive as a dict (what our datasets
# decode to) or as a JSON string (what OpenAI clients send): a string is trusted as JSON text,
# the way Qwen3's template does it. The generation prompt is exactly the head of a rendered
# assistant turn, so the prompt's tokens are a prefix of prompt+completion's tokens.
CHAT_TEMPLATE = """\
{%- macro render_args(args) -%}
{%- if args is string -%}{{ args }}{%- else -%}{{ args | tojson }}{%- endif -%}
{%- endmacro -%}
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{ messages[0].content ~ '\\n\\n' }}{% endif %}
{{- '# Tools\\n<tools>' }}
{%- for tool in tools %}{{ '\\n' ~ (tool | tojson) }}{% endfor %}
{{- '\\n</tools><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' ~ messages[0].content ~ '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' and loop.first %}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant\\n' ~ (message.content or '') }}
{%- for call in (message.tool_calls or []) %}
{%- set fn = call.function if call.function is defined else call %}
{{- '<tool_call>{"name": "' ~ fn.name ~ '", "arguments": ' ~ render_args(fn.arguments) ~ '}</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{{- '<|im_start|>tool\\n' ~ message.content ~ '<|im_end|>\\n' }}
{%- else %}
{{- '<|im_start|>' ~ message.role ~ '\\n' ~ message.content ~ '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}
"""

_CORPUS = [
    "You are a coding agent. Use the tools to inspect and change the repository.",
    'Run the tests and fix the failing one. <tool_call>{"name": "Bash", "arguments": {"command": "ls -la"}}',
    '{"type": "function", "function": {"name": "Read", "parameters": {"file_path": "src/app.py"}}}',
    "def main():\n    return 0\n\nimport os, sys, json\nclass Config:\n    pass\n",
    "pytest -q tests/test_app.py\n3 passed, 1 failed in 0.12s\nAssertionError: expected 2 got 3",
    "The bug is in parse(); the loop stops one item early. I will edit the file.",
]


def build_tokenizer(out_dir: str | Path, corpus: list[str] | None = None, vocab_size: int = 512,
                    across_words: bool = False):
    """Train the byte-level BPE, attach the chat template, save it to `out_dir`; returns the tokenizer.

    By default tokens stay inside GPT-2's pre-tokens (words, runs of spaces or newlines), as real
    byte-level BPEs do. `across_words` lets merges span spaces (only newlines split), which is how a
    2,000-token vocabulary trained on agent traces reaches ~4 characters per token of rendered rows,
    like the large vocabularies of real models."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    if across_words:
        bpe.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, IM_START, IM_END],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(corpus or _CORPUS * 4, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=IM_END, pad_token=PAD,
                                        chat_template=CHAT_TEMPLATE)
    tokenizer.save_pretrained(str(out_dir))
    return tokenizer


def build_model(out_dir: str | Path, tokenizer, seed: int = 0):
    """A randomly initialised 2-layer Llama sized to `tokenizer`, saved to `out_dir`; returns the model."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=16384, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    model = LlamaForCausalLM(config)
    model.save_pretrained(str(out_dir))
    return model


def build_tiny(out_dir: str | Path, corpus: list[str] | None = None, vocab_size: int = 512,
               across_words: bool = False) -> Path:
    """Tokenizer and model side by side in one folder, loadable with `from_pretrained(out_dir)`."""
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    build_model(path, build_tokenizer(path, corpus, vocab_size, across_words))
    return path


def trace_corpus(states) -> list[str]:
    """Every distinct text of some TraceStates (messages, actions, tool schemas): what a tokenizer for
    them is trained on."""
    import json

    seen: dict[str, None] = {}
    for state in states:
        for message in [*state.messages, state.student_action.to_message()]:
            seen[message.get("content") or ""] = None
            if message.get("tool_calls"):
                seen[json.dumps(message["tool_calls"])] = None
        seen[json.dumps(state.tools)] = None
    return [text for text in seen if text]


def build_four_chars_tiny(out_dir: str | Path, states) -> Path:
    """A tiny model whose tokenizer averages ~4 characters per token on `states` (tests measure it)."""
    return build_tiny(out_dir, trace_corpus(states), vocab_size=2000, across_words=True)


def train_dpo_two_steps(model_dir: Path, dataset, out_dir: Path, max_length: int = 4096):
    """DPOTrainer on CPU for 2 steps (an explicit frozen reference model): the check that a run's
    dataset trains as it is. Returns (trainer, training output)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    torch.manual_seed(0)
    args = DPOConfig(output_dir=str(out_dir), bf16=False, use_cpu=True, max_steps=2,
                     per_device_train_batch_size=2, report_to=[], logging_steps=1, save_strategy="no",
                     max_length=max_length, seed=0, disable_tqdm=True)
    model, ref = (AutoModelForCausalLM.from_pretrained(str(model_dir)) for _ in range(2))
    trainer = DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=dataset,
                         processing_class=AutoTokenizer.from_pretrained(str(model_dir)))
    return trainer, trainer.train()
