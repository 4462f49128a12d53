"""Tokens and USD: per call from the usage the provider returned, and estimated for dry runs and budgets.

Prices come from litellm's bundled cost map, through `litellm.cost_per_token(usage_object=...)`, so a
prompt token the provider served from its prompt cache is billed at the cached rate (OpenAI and Gemini
`prompt_tokens_details.cached_tokens`, DeepSeek `prompt_cache_hit_tokens`, Anthropic
`cache_read_input_tokens`, and `cache_creation_input_tokens` at the cache-write rate) and batch calls at
the batch rates. A teacher whose endpoint has its own base URL is priced only by the price its spec
gives (`TeacherSpec.price`); without one it is *unpriced*: it costs 0.0 and the report says so. A
model litellm does not price is unpriced too. Tokens are counted either way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
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
    cached: int = 0              # of those calls, answered by the response cache already: they cost nothing
    prompt_tokens: int = 0       # per call
    completion_tokens: int = 0   # per call, assumed
    cached_prompt_tokens: int = 0  # per call: the part of the prompt the provider's prompt cache should hold
    cost_usd: float = 0.0        # the calls not cached
    batch: bool = False          # priced at batch rates, no prompt-cache hit assumed
    cost_usd_if_cached: float | None = None  # batch: if the batch hit the prompt cache as live calls do
    cost_usd_low: float = 0.0    # the range: fewest completion tokens per call expected, prompt side low
    cost_usd_high: float = 0.0   # most completion tokens per call expected (p90 or the prior's), prompt high


@dataclass(frozen=True)
class Tokens:
    """One call's usage. `prompt` counts every prompt token, cached or written ones included (litellm
    normalises every provider to this); `cached` were read from the provider's prompt cache, `cache_write`
    were written to it (Anthropic-style explicit caching, billed above the plain input rate)."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    cache_write: int = 0


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def tokens_of(response: dict[str, Any]) -> Tokens:
    """A chat.completion body's usage, whatever provider shape it came in.

    >>> tokens_of({"usage": {"prompt_tokens": 100, "completion_tokens": 5,
    ...                      "prompt_tokens_details": {"cached_tokens": 64}}})
    Tokens(prompt=100, completion=5, cached=64, cache_write=0)
    >>> tokens_of({"usage": {"prompt_tokens": 100, "completion_tokens": 5, "prompt_cache_hit_tokens": 64}})
    Tokens(prompt=100, completion=5, cached=64, cache_write=0)
    >>> tokens_of({})
    Tokens(prompt=0, completion=0, cached=0, cache_write=0)
    """
    counts = response.get("usage") or {}
    details = counts.get("prompt_tokens_details") or {}
    cached = _int(details.get("cached_tokens")) or _int(counts.get("prompt_cache_hit_tokens")) \
        or _int(counts.get("cache_read_input_tokens"))
    written = _int(details.get("cache_creation_tokens")) or _int(details.get("cache_write_tokens")) \
        or _int(counts.get("cache_creation_input_tokens"))
    return Tokens(_int(counts.get("prompt_tokens")), _int(counts.get("completion_tokens")), cached, written)


def usage(response: dict[str, Any]) -> tuple[int, int]:
    """(prompt_tokens, completion_tokens) from a chat.completion body; (0, 0) when absent.

    >>> usage({"usage": {"prompt_tokens": 12, "completion_tokens": 3}}), usage({})
    ((12, 3), (0, 0))
    """
    tokens = tokens_of(response)
    return tokens.prompt, tokens.completion


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


def price_model(teacher: TeacherSpec | str) -> str | None:
    """The litellm model whose prices a teacher pays, or None when it is priced by numbers or unpriced.

    >>> price_model(TeacherSpec(name="a", model="gpt-5")), price_model(
    ...     TeacherSpec(name="b", model="openai/gpt-5", api_base="http://127.0.0.1:8000/v1"))
    ('gpt-5', None)
    """
    if isinstance(teacher, str):
        return teacher if is_priced(teacher) else None
    if teacher.price is not None:
        return teacher.price.as_model
    if teacher.api_base:  # named like a real model, served by someone else: never priced as it
        return None
    return teacher.model if is_priced(teacher.model) else None


def unpriced_reason(teacher: TeacherSpec) -> str | None:
    """Why a teacher's calls cost 0.0 in the report, or None when they are priced.

    >>> unpriced_reason(TeacherSpec(name="b", model="openai/gpt-5", api_base="http://127.0.0.1:8000/v1"))
    'custom endpoint without a price (add #price=MODEL or #price=INPUT/OUTPUT to its entry)'
    """
    if teacher.price is not None or price_model(teacher):
        return None
    if teacher.api_base:
        return "custom endpoint without a price (add #price=MODEL or #price=INPUT/OUTPUT to its entry)"
    return "not in litellm's cost map (add #price=INPUT/OUTPUT to its entry)"


def _custom_rates(teacher: TeacherSpec, batch: bool) -> dict[str, float] | None:
    price = teacher.price
    if price is None or price.as_model or price.input is None or price.output is None:
        return None
    factor = 0.5e-6 if batch else 1e-6  # per million; batch APIs bill half
    rates = {"input_cost_per_token": price.input * factor, "output_cost_per_token": price.output * factor}
    for field, key in (("cached_input", "cache_read_input_token_cost"),
                       ("cache_write", "cache_creation_input_token_cost")):
        if getattr(price, field) is not None:
            rates[key] = getattr(price, field) * factor
    return rates


def cost_of(teacher: TeacherSpec | str, tokens: Tokens, batch: bool = False) -> float:
    """USD for one call's usage at the teacher's price (batch rates when `batch`); 0.0 when unpriced.

    >>> spec = TeacherSpec(name="gpt-5", model="gpt-5")
    >>> round(cost_of(spec, Tokens(prompt=10_000, completion=100, cached=8_000)), 6)  # 2k full, 8k cached
    0.0045
    >>> round(cost_of(spec, Tokens(prompt=10_000, completion=100, cached=8_000), batch=True), 6)
    0.00225
    """
    custom = _custom_rates(teacher, batch) if isinstance(teacher, TeacherSpec) else None
    model = price_model(teacher)
    if custom is None and model is None:
        return 0.0
    litellm = load_litellm()
    usage_object = litellm.Usage(
        prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
        total_tokens=tokens.prompt + tokens.completion,
        prompt_tokens_details={"cached_tokens": tokens.cached, "cache_creation_tokens": tokens.cache_write})
    try:
        prompt_usd, completion_usd = litellm.cost_per_token(
            model=model or "openai/custom", prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
            usage_object=usage_object, custom_cost_per_token=custom,
            call_type="aretrieve_batch" if batch and custom is None else "completion")
    except Exception as error:  # a cost-map quirk must not lose an answer that was paid for
        log.warning("no price for %s: %s", model, type(error).__name__)
        return 0.0
    return float(prompt_usd) + float(completion_usd)


def call_cost(teacher: TeacherSpec | str, prompt_tokens: int, completion_tokens: int, cached: int = 0,
              cache_write: int = 0, batch: bool = False) -> float:
    """USD for one call from token counts; 0.0 when the teacher is unpriced.

    >>> round(call_cost("deepseek/deepseek-chat", 1_000_000, 0), 4) > 0, call_cost("openai/m", 10, 10)
    (True, 0.0)
    """
    return cost_of(teacher, Tokens(prompt_tokens, completion_tokens, cached, cache_write), batch=batch)


def response_cost(teacher: TeacherSpec, response: dict[str, Any], batch: bool = False) -> float:
    """USD of one answer, from the usage it came back with (cached input at the cached price)."""
    return cost_of(teacher, tokens_of(response), batch=batch)


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
    """Tokens and USD a teacher would cost on these messages, every prompt token at the full price
    (no prompt cache); calls nothing. `TeacherPool.estimate` models the prompt cache per trace.

    >>> spec = TeacherSpec(name="deepseek", model="deepseek/deepseek-chat")
    >>> e = estimate(spec, [{"role": "user", "content": "hi"}], [], 400)
    >>> (e.prompt_tokens > 0, e.completion_tokens, e.cost_usd > 0)
    (True, 400, True)
    """
    prompt = count_prompt_tokens(spec.model, messages, tools)
    usd = call_cost(spec, prompt, expected_completion_tokens) * max(calls - cached, 0)
    return Estimate(teacher=spec.name, model=spec.model, calls=calls, cached=cached, prompt_tokens=prompt,
                    completion_tokens=expected_completion_tokens, cost_usd=usd)
