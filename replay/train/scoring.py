"""Log-likelihoods of preference pairs under a model, tokenized as TRL's DPOTrainer tokenizes them.

A pair's prompt is rendered with the student's chat template and `tools` plus the generation prompt,
then prompt + completion without it; the completion is what follows their common prefix
(`trl.data_utils.common_prefix_length`, as DPOTrainer does). A completion's log-likelihood is the sum
over its tokens. Sequences are left-padded into batches so every completion ends the row, and only
the last positions' logits are computed (`logits_to_keep`): a 150k-token vocabulary over a whole
8k-token prompt would not fit in memory. Pairs whose prompt + completion passes `max_length` are left
out and counted (`too_long`), never truncated: a cut completion would be judged on what remains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Pair = dict[str, Any]  # prompt, chosen, rejected, tools (the dataset's conversational columns)


def tokenize_pair(tokenizer: Any, pair: Pair) -> tuple[list[int], list[int], list[int]]:
    """(prompt ids, chosen completion ids, rejected completion ids), as DPOTrainer splits them."""
    from trl.data_utils import common_prefix_length

    tools = pair.get("tools") or None

    def ids(messages: list[dict[str, Any]], generation: bool = False) -> list[int]:
        out = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=generation,
                                            tokenize=True, return_dict=True)
        return list(out["input_ids"])

    prompt = ids(pair["prompt"], generation=True)
    chosen, rejected = ids(pair["prompt"] + pair["chosen"]), ids(pair["prompt"] + pair["rejected"])
    cut = min(common_prefix_length(prompt, chosen), common_prefix_length(prompt, rejected))
    return prompt[:cut], chosen[cut:], rejected[cut:]


def score_pairs(model: Any, tokenizer: Any, pairs: Sequence[Pair], max_length: int, batch_size: int = 4,
                tick: Callable[[], None] | None = None) -> tuple[list[tuple[float, float] | None], int]:
    """Per pair (log π(chosen|prompt), log π(rejected|prompt)), None where it does not fit
    `max_length`; and how many did not fit."""
    sequences: list[tuple[int, int, list[int], int]] = []  # (pair, side, ids, completion length)
    out: list[tuple[float, float] | None] = [None] * len(pairs)
    too_long = 0
    for number, pair in enumerate(pairs):
        prompt, chosen, rejected = tokenize_pair(tokenizer, pair)
        if len(prompt) + max(len(chosen), len(rejected)) > max_length or not chosen or not rejected:
            too_long += 1
            continue
        sequences += [(number, 0, prompt + chosen, len(chosen)),
                      (number, 1, prompt + rejected, len(rejected))]
    sequences.sort(key=lambda s: len(s[2]))
    found: dict[tuple[int, int], float] = {}
    for start in range(0, len(sequences), batch_size):
        batch = sequences[start:start + batch_size]
        for (number, side, _, _), value in zip(batch, _logps(model, tokenizer, batch), strict=True):
            found[(number, side)] = value
        if tick is not None:
            tick()
    for number in range(len(pairs)):
        if (number, 0) in found:
            out[number] = (found[(number, 0)], found[(number, 1)])
    return out, too_long


def _logps(model: Any, tokenizer: Any, batch: list[tuple[int, int, list[int], int]]) -> list[float]:
    """Sum of each row's completion log-probs: left padding puts every completion at the end."""
    import torch

    device = next(model.parameters()).device
    width = max(len(ids) for _, _, ids, _ in batch)
    keep = max(length for *_, length in batch) + 1
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for _, _, ids, _ in batch], device=device)
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for _, _, ids, _ in batch], device=device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                       logits_to_keep=keep, use_cache=False).logits
        logps = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        targets = input_ids[:, -(keep - 1):]
        per_token = logps.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    out = []
    for row, (*_, length) in enumerate(batch):
        out.append(float(per_token[row, per_token.size(1) - length:].sum()))
    return out
