"""How much of a request a provider's prompt cache will hold: the model behind dry-run estimates and
`--max-cost` reservations.

Within a trace every request extends the one before it (tools, system prompt, then the messages, in
order), and the pool asks one trace's states to a teacher one after another. So the provider still
holds the previous request when the next one arrives, and everything the two share is read from its
cache. The first request of a trace pays full price. The providers' rules, from their docs:

- OpenAI (and Azure): automatic for prompts of 1024 tokens or more, cached in 128-token increments.
- DeepSeek: automatic; a request that extends an earlier one reads the earlier one from its disk cache
  (older docs: in 64-token units).
- Anthropic (also via Bedrock / Vertex): only at `cache_control` breakpoints (the pool marks the system
  prompt and the latest message), at least `prompt_cache_min_tokens`; what is new is written at the
  cache-write rate (1.25x input), what an earlier breakpoint covered is read at 0.1x.
- Gemini and others with a cached price in litellm's map: automatic above `prompt_cache_min_tokens`
  (1024 when the map says nothing).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from teachers.cost import Tokens, count_prompt_tokens, price_model
from teachers.llm import load_litellm
from teachers.registry import TeacherSpec

_EXPLICIT = frozenset({"anthropic", "bedrock", "bedrock_converse", "vertex_ai", "vertex_ai_beta", "azure_ai"})
_STEPS = {"openai": 128, "azure": 128, "deepseek": 64}
_TOKEN_MEMO = 200_000  # message token counts kept (by content hash): a trace's messages repeat in every state


@dataclass(frozen=True)
class CacheRules:
    """`explicit`: only at cache_control breakpoints, new tokens written at the cache-write rate."""

    min_tokens: int = 1024
    step: int = 1
    explicit: bool = False

    def cached(self, shared: int) -> int:
        """Tokens of a `shared` prefix the provider bills as cached.

        >>> CacheRules(1024, 128).cached(1000), CacheRules(1024, 128).cached(5000)
        (0, 4992)
        """
        if shared < self.min_tokens:
            return 0
        return self.min_tokens + (shared - self.min_tokens) // self.step * self.step


@lru_cache(maxsize=256)
def _rules_for_model(model: str) -> CacheRules | None:
    litellm = load_litellm()
    try:
        info = litellm.get_model_info(model)
        provider = litellm.get_llm_provider(model)[1]
    except Exception:  # not in the cost map: no cached price either
        return None
    if not info.get("cache_read_input_token_cost"):
        return None
    explicit = provider in _EXPLICIT and "claude" in model.lower()
    default_min = {"deepseek": 64}.get(provider, 1024)
    return CacheRules(min_tokens=int(info.get("prompt_cache_min_tokens") or default_min),
                      step=_STEPS.get(provider, 1), explicit=explicit)


def cache_rules(teacher: TeacherSpec) -> CacheRules | None:
    """The prompt-cache rules the teacher's calls are billed by; None when nothing is billed as cached.

    >>> cache_rules(TeacherSpec(name="gpt-5", model="gpt-5"))
    CacheRules(min_tokens=1024, step=128, explicit=False)
    >>> cache_rules(TeacherSpec(name="c", model="anthropic/claude-sonnet-4-6")).explicit
    True
    """
    price = teacher.price
    if price is not None and price.as_model is None:  # numbers: cached only if a cached price is given
        return CacheRules(min_tokens=1024) if price.cached_input is not None else None
    model = price_model(teacher)
    return _rules_for_model(model) if model else None


def _digest(block: Any) -> bytes:
    return hashlib.blake2b(orjson.dumps(block, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


class PrefixModel:
    """Predicts each request's cached and written prompt tokens from the request the same teacher got
    last in the same trace. Call `predict` in turn order per (teacher, trace); it remembers the request."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[list[bytes], list[int]]] = {}
        self._latest: dict[tuple[str, str], tuple[list[bytes], list[int]]] = {}  # waves: see start_wave
        self._tokens: dict[tuple[str, bytes], int] = {}

    def _block_tokens(self, model: str, key: bytes, block: Any, tools: bool) -> int:
        found = self._tokens.get((model, key))
        if found is None:
            # One message counted alone carries the chat format's few tokens of framing, as it does in a
            # whole prompt; tools are counted beside an empty prompt, whose framing is taken off.
            found = (count_prompt_tokens(model, [], block) - count_prompt_tokens(model, [], [])) if tools \
                else count_prompt_tokens(model, [block], [])
            if len(self._tokens) >= _TOKEN_MEMO:
                self._tokens.clear()
            self._tokens[(model, key)] = found
        return found

    def blocks(self, teacher: TeacherSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
               ) -> tuple[list[bytes], list[int]]:
        """(digests, tokens) of the request's cacheable blocks, in the order providers cache them:
        the tools, then each message."""
        model = price_model(teacher) or teacher.model
        keys, sizes = [], []
        for block, is_tools in [(tools, True), *((m, False) for m in messages)]:
            key = _digest(block)
            keys.append(key)
            sizes.append(self._block_tokens(model, key, block, is_tools) if (block or not is_tools) else 0)
        return keys, sizes

    def predict(self, teacher: TeacherSpec, trace_id: str, messages: list[dict[str, Any]],
                tools: list[dict[str, Any]], completion_tokens: int = 0, remember: bool = True) -> Tokens:
        """The usage this request should come back with, and remember it as the trace's latest
        (`remember=False`: a state of a wave, compared with the wave's base, `start_wave`)."""
        keys, sizes = self.blocks(teacher, messages, tools)
        prompt = sum(sizes)
        previous = self._last.get((teacher.name, trace_id))
        self._latest[(teacher.name, trace_id)] = (keys, sizes)
        if remember:
            self._last[(teacher.name, trace_id)] = (keys, sizes)
        rules = cache_rules(teacher)
        if rules is None:
            return Tokens(prompt, completion_tokens)
        shared_blocks = 0
        if previous is not None:
            while (shared_blocks < min(len(keys), len(previous[0]))
                   and keys[shared_blocks] == previous[0][shared_blocks]):
                shared_blocks += 1
        shared = sum(sizes[:shared_blocks])
        if not rules.explicit:
            return Tokens(prompt, completion_tokens, cached=rules.cached(shared))
        return Tokens(prompt, completion_tokens, *self._breakpoints(rules, sizes, shared_blocks, previous))

    def start_wave(self, teacher: TeacherSpec, trace_id: str) -> None:
        """States asked together next (`--trace-parallel`) find the latest request in the cache."""
        if (latest := self._latest.get((teacher.name, trace_id))) is not None:
            self._last[(teacher.name, trace_id)] = latest

    @staticmethod
    def _breakpoints(rules: CacheRules, sizes: list[int], shared_blocks: int,
                     previous: tuple[list[bytes], list[int]] | None) -> tuple[int, int]:
        """(read, written) with breakpoints on the system prompt (block 1) and the latest message."""
        prompt = sum(sizes)
        if prompt < rules.min_tokens:
            return 0, 0
        ends = [] if previous is None else [2, len(previous[0])]  # where the last request's breakpoints were
        read = max((sum(sizes[:end]) for end in ends if end <= shared_blocks), default=0)
        read = read if read >= rules.min_tokens else 0
        return read, prompt - read
