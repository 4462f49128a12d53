"""Tokens and USD: per call from the response's usage, and estimated for dry runs.

Prices come from litellm's bundled cost map. A model it does not price costs 0.0 (its tokens are
still counted), so `--max-cost` cannot protect a run against unpriced models; the report says so.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from teachers.llm import load_litellm
from teachers.registry import TeacherSpec

log = logging.getLogger(__name__)


class Estimate(BaseModel):
    """A dry-run estimate for one teacher on one state (all samples)."""

    teacher: str
    model: str
    calls: int = 1
    cached: int = 0              # of those calls, answered by the cache already: they cost nothing
    prompt_tokens: int = 0       # per call
    completion_tokens: int = 0   # per call, assumed
    cost_usd: float = 0.0        # the calls not cached


@lru_cache(maxsize=256)
def is_priced(model: str) -> bool:
    """Whether litellm's cost map knows the model (asked once per model: a miss raises, slowly).

    >>> is_priced("deepseek/deepseek-chat"), is_priced("openai/some-local-model")
    (True, False)
    """
    try:
        info = load_litellm().get_model_info(model)
    except Exception:  # litellm raises ModelNotMappedError / its BadRequestError for unknown names
        return False
    return bool(info.get("input_cost_per_token") or info.get("output_cost_per_token")
                or info.get("tiered_pricing"))


def call_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for one call, 0.0 when the model is not priced.

    Prompt-cache discounts are not applied: a budget should err on the side of stopping early.

    >>> round(call_cost("deepseek/deepseek-chat", 1_000_000, 0), 4) > 0, call_cost("openai/m", 10, 10)
    (True, 0.0)
    """
    if not is_priced(model):
        return 0.0
    try:
        prompt_usd, completion_usd = load_litellm().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except Exception as error:  # a cost-map quirk must not lose an answer that was paid for
        log.warning("no price for %s: %s", model, type(error).__name__)
        return 0.0
    return float(prompt_usd) + float(completion_usd)


def usage(response: dict[str, Any]) -> tuple[int, int]:
    """(prompt_tokens, completion_tokens) from a chat.completion body; (0, 0) when absent.

    >>> usage({"usage": {"prompt_tokens": 12, "completion_tokens": 3}}), usage({})
    ((12, 3), (0, 0))
    """
    counts = response.get("usage") or {}
    return int(counts.get("prompt_tokens") or 0), int(counts.get("completion_tokens") or 0)


def count_prompt_tokens(model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    """Prompt tokens as litellm counts them, offline.

    litellm's token_counter uses its bundled tiktoken files; for the few names that would make it
    download a Hugging Face tokenizer (llama, cohere, claude-2), `load_litellm` switches that off, so
    those are tiktoken approximations. If counting still fails, characters / 4.

    >>> count_prompt_tokens("gpt-5", [{"role": "user", "content": "hello world"}], []) > 0
    True
    """
    try:
        return int(load_litellm().token_counter(model=model, messages=messages, tools=tools or None))
    except Exception as error:
        log.warning("token_counter failed for %s (%s); estimating chars/4", model, type(error).__name__)
        chars = sum(len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in messages)
        return (chars + sum(len(str(t)) for t in tools)) // 4


def estimate(spec: TeacherSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
             expected_completion_tokens: int = 400, calls: int = 1, cached: int = 0) -> Estimate:
    """Tokens and USD a teacher would cost on these messages; calls nothing.

    >>> spec = TeacherSpec(name="deepseek", model="deepseek/deepseek-chat")
    >>> e = estimate(spec, [{"role": "user", "content": "hi"}], [], 400)
    >>> (e.prompt_tokens > 0, e.completion_tokens, e.cost_usd > 0)
    (True, 400, True)
    """
    prompt = count_prompt_tokens(spec.model, messages, tools)
    usd = call_cost(spec.model, prompt, expected_completion_tokens) * max(calls - cached, 0)
    return Estimate(teacher=spec.name, model=spec.model, calls=calls, cached=cached, prompt_tokens=prompt,
                    completion_tokens=expected_completion_tokens, cost_usd=usd)
