"""TRL pre-flight: render every pair through the target tokenizer's chat template, as DPOTrainer will,
and drop the rows it would train on badly.

DPOTrainer (TRL 1.16) tokenizes `prompt` with `add_generation_prompt=True`, then `prompt + chosen` and
`prompt + rejected`, all with `tools=`. When the prompt's tokens are not a prefix of the others
(templates that render history differently once a reply follows, or tokens merging across the
boundary), TRL cuts at the common prefix and trains on a context the model never sees at inference;
we drop such rows instead. Rows longer than `max_length` would be truncated; we drop those too.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DROP_REASONS = ("template_error", "prompt_not_prefix_of_chosen", "prompt_not_prefix_of_rejected", "too_long")


def load_tokenizer(tokenizer: Any):
    """A tokenizer object as is, or one loaded from a path or Hub name."""
    if isinstance(tokenizer, str | Path):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(tokenizer))
    return tokenizer


def _ids(tokenizer: Any, messages: list[dict[str, Any]], tools: Any, **kwargs: Any) -> list[int]:
    # The same call TRL's DPOTrainer makes (trl.data_utils._tokenize), so what passes here passes there.
    encoded = tokenizer.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True, **kwargs)
    return list(encoded["input_ids"])


def check_row(row: dict[str, Any], tokenizer: Any, max_length: int | None = None) -> str | None:
    """The reason to drop one row (see `DROP_REASONS`), or None to keep it."""
    from jinja2 import TemplateError

    tools = row.get("tools")
    tools = json.loads(tools) if isinstance(tools, str) else tools  # as TRL does
    try:
        prompt = _ids(tokenizer, row["prompt"], tools, add_generation_prompt=True)
        chosen = _ids(tokenizer, row["prompt"] + row["chosen"], tools)
        rejected = _ids(tokenizer, row["prompt"] + row["rejected"], tools)
    except (TemplateError, ValueError, TypeError, KeyError):
        return "template_error"
    if chosen[:len(prompt)] != prompt:
        return "prompt_not_prefix_of_chosen"
    if rejected[:len(prompt)] != prompt:
        return "prompt_not_prefix_of_rejected"
    if max_length is not None and max(len(chosen), len(rejected)) > max_length:
        return "too_long"
    return None


def preflight(rows: Iterable[dict[str, Any]], tokenizer: Any,
              max_length: int | None = None) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Rows that render cleanly through `tokenizer` (a path, Hub name or tokenizer object), and a
    Counter of drop reasons for the rest. Input rows are not modified."""
    tokenizer = load_tokenizer(tokenizer)
    kept: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    for row in rows:
        reason = check_row(row, tokenizer, max_length)
        if reason is None:
            kept.append(row)
        else:
            dropped[reason] += 1
    return kept, dropped
