"""A loopback LLM server with a provider's prompt cache: usage reports the part of each prompt that an
earlier completed request to the same model shared, as OpenAI, DeepSeek or Anthropic report it.

The rules follow the providers' documentation, not our own model of them (teachers/prompt_cache.py):

- openai (openai-cookbook "Prompt Caching 201"): automatic for prompts of 1024 tokens or more, hits in
  128-token increments, the whole request prefix (tools first, then the messages) is cacheable; entries
  live 5-10 minutes of inactivity. `usage.prompt_tokens_details.cached_tokens`.
- deepseek (api-docs.deepseek.com/guides/kv_cache): every request persists a cache unit at the end of
  its input; a later request hits a unit only when it contains all of it.
  `usage.prompt_cache_hit_tokens` / `prompt_cache_miss_tokens`.
- anthropic (docs.anthropic.com prompt caching): only at `cache_control` breakpoints (tools, then system,
  then messages); a breakpoint reads the longest earlier entry ending within 20 blocks before it; what
  follows the read up to the last breakpoint is written; prompts under the model's minimum (1024) are
  not cached; 5-minute TTL refreshed on use. `usage.cache_read_input_tokens`,
  `cache_creation_input_tokens`, `input_tokens` (only the tokens after the last breakpoint).

Tokens are tiktoken's o200k_base counts of each block's text as a chat template renders it (content,
tool-call names and arguments, tool schemas as JSON, a few tokens of framing per message, as OpenAI's
cookbook counts them); prefixes match block by block.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from tests.llm_server import LLMServer, Reply, chat_completion

Block = tuple[bytes, int, bool]  # (digest of everything up to and including it, tokens so far, breakpoint)
_LOOKBACK = 20  # blocks Anthropic searches back from a breakpoint


@lru_cache(maxsize=1)
def _encoder() -> Any:
    # litellm points TIKTOKEN_CACHE_DIR at the encodings it bundles (offline), on import of this module.
    import litellm.litellm_core_utils.default_encoding  # noqa: F401
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


@dataclass
class PromptCache:
    """The provider's side of prompt caching, per model; thread-safe."""

    flavor: str = "openai"
    ttl: float = 300.0
    min_tokens: int = 1024
    clock: Callable[[], float] = time.monotonic
    entries: dict[tuple[str, bytes], list[float]] = field(default_factory=dict)  # -> [tokens, last used]
    ledger: list[dict[str, Any]] = field(default_factory=list)  # every usage returned, with its model
    _sizes: dict[bytes, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _tokens(self, text: bytes, part: Any) -> int:
        key = hashlib.blake2b(text, digest_size=16).digest()
        if key not in self._sizes:
            self._sizes[key] = len(_encoder().encode(_rendered(part), disallowed_special=())) + (
                3 if isinstance(part, dict) else 0)
        return self._sizes[key]

    def blocks(self, body: dict[str, Any]) -> list[Block]:
        """The request as the provider caches it: tools, then system, then each message (Anthropic:
        each content block), with running digests and token totals."""
        parts: list[tuple[Any, bool]] = []
        if self.flavor == "anthropic":
            parts += [(tool, "cache_control" in tool) for tool in body.get("tools") or []]
            system = body.get("system") or []
            parts += [(block, "cache_control" in block) for block in
                      ([{"type": "text", "text": system}] if isinstance(system, str) else system)]
            for message in body.get("messages") or []:
                content = message.get("content")
                content = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
                parts += [({"role": message.get("role"), **block}, "cache_control" in block)
                          for block in content]
        else:
            parts += [(body.get("tools") or [], False)]
            parts += [(message, False) for message in body.get("messages") or []]
        out, digest, total = [], b"", 0
        for part, breakpoint in parts:
            if isinstance(part, dict):  # a breakpoint marks where to cache; it is not content
                part = {k: v for k, v in part.items() if k != "cache_control"}
            text = json.dumps(part, sort_keys=True, ensure_ascii=False).encode()
            digest = hashlib.blake2b(digest + text, digest_size=16).digest()
            total += self._tokens(text, part) if part else 0
            out.append((digest, total, breakpoint))
        return out

    def _live(self, model: str, digest: bytes, now: float) -> bool:
        entry = self.entries.get((model, digest))
        return entry is not None and now - entry[1] <= self.ttl

    def serve(self, model: str, body: dict[str, Any], completion_tokens: int,
              store: bool = True) -> dict[str, Any]:
        """The usage of a request processed now; its prefixes become cache entries (`store=False`: not
        yet, `store` them when the request is done, so requests sent together do not hit each other)."""
        blocks = self.blocks(body)
        prompt = blocks[-1][1] if blocks else 0
        with self._lock:
            now = self.clock()
            if self.flavor == "anthropic":
                usage = self._anthropic(model, blocks, prompt, now, completion_tokens, store)
            else:
                hit = max((i for i, b in enumerate(blocks) if self._live(model, b[0], now)), default=None)
                shared = blocks[hit][1] if hit is not None else 0
                if hit is not None:
                    self.entries[(model, blocks[hit][0])][1] = now
                usage = self._automatic(shared, prompt, completion_tokens)
                if store:
                    self._store(model, blocks, now)
            self.ledger.append({"model": model, "usage": usage})
        return usage

    def store(self, model: str, body: dict[str, Any]) -> None:
        """A request's prefixes become cache entries (after `serve(..., store=False)`)."""
        blocks = self.blocks(body)
        with self._lock:
            self._store(model, blocks, self.clock())

    def _store(self, model: str, blocks: list[Block], now: float) -> None:
        if self.flavor == "anthropic":
            marks = [i for i, b in enumerate(blocks) if b[2]]
            if marks and blocks[marks[-1]][1] >= self.min_tokens:
                for mark in marks:
                    if blocks[mark][1] >= self.min_tokens:
                        self.entries[(model, blocks[mark][0])] = [blocks[mark][1], now]
            return
        stored = blocks if self.flavor == "openai" else blocks[-1:]  # deepseek: whole prompts only
        for digest, tokens, _ in stored:
            self.entries[(model, digest)] = [tokens, now]

    def _automatic(self, shared: int, prompt: int, completion: int) -> dict[str, Any]:
        if self.flavor == "deepseek":
            return {"prompt_tokens": prompt, "completion_tokens": completion,
                    "total_tokens": prompt + completion, "prompt_cache_hit_tokens": shared,
                    "prompt_cache_miss_tokens": prompt - shared}
        cached = 0 if shared < 1024 else 1024 + (shared - 1024) // 128 * 128
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0}}

    def _anthropic(self, model: str, blocks: list[Block], prompt: int, now: float,
                   completion: int, store: bool = True) -> dict[str, Any]:
        marks = [i for i, b in enumerate(blocks) if b[2]]
        read = written = 0
        if marks and blocks[marks[-1]][1] >= self.min_tokens:
            for mark in marks:
                for i in range(mark, max(mark - _LOOKBACK, -1), -1):
                    if self._live(model, blocks[i][0], now):
                        self.entries[(model, blocks[i][0])][1] = now
                        read = max(read, blocks[i][1])
                        break
            written = blocks[marks[-1]][1] - read
            if store:
                self._store(model, blocks, now)
        return {"input_tokens": prompt - read - written, "output_tokens": completion,
                "cache_read_input_tokens": read, "cache_creation_input_tokens": written}


def _rendered(part: Any) -> str:
    """The text a chat template makes of a block: what a provider tokenises and bills."""
    if isinstance(part, list):  # the tool schemas
        return json.dumps(part, ensure_ascii=False)
    texts = [str(part.get("role") or ""), _content_text(part.get("content")), str(part.get("text") or "")]
    texts += [f"{c['function']['name']}{c['function']['arguments']}" for c in part.get("tool_calls") or []]
    if part.get("type") == "tool_use":
        texts.append(f"{part.get('name')}{json.dumps(part.get('input'), ensure_ascii=False)}")
    if "tool_call_id" in part or "tool_use_id" in part:
        texts.append(str(part.get("tool_call_id") or part.get("tool_use_id")))
    if part.get("type") == "function":  # an Anthropic tool schema
        texts.append(json.dumps(part, ensure_ascii=False))
    if "input_schema" in part:
        texts.append(json.dumps(part, ensure_ascii=False))
    return "".join(texts)


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(block.get("text") or _content_text(block.get("content"))) for block in content
                       if isinstance(block, dict))
    return str(content or "")


def anthropic_message(reply: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat.completion body as an Anthropic Messages API response."""
    message = reply["choices"][0]["message"]
    content: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}] if message.get("content") \
        else []
    content += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                 "input": json.loads(c["function"]["arguments"])} for c in message.get("tool_calls") or []]
    return {"id": "msg_test", "type": "message", "role": "assistant", "model": reply.get("model", "m"),
            "content": content, "stop_reason": "tool_use" if message.get("tool_calls") else "end_turn",
            "stop_sequence": None, "usage": usage}


def caching_responder(cache: PromptCache, answer: Callable[[dict[str, Any]], Reply] | None = None,
                      completion_tokens: Callable[[dict[str, Any]], int] | None = None
                      ) -> Callable[[dict[str, Any]], Reply]:
    """A responder for `LLMServer`: `answer` scripts the reply; usage comes from `cache`. A reply with a
    delay reads the cache as it arrives and writes it when it is answered: two requests in flight at once
    do not find each other's prefixes, as at a provider (the prefix is cached once it is processed)."""
    answer = answer or (lambda body: Reply(chat_completion("ok", model=body.get("model", "m"))))
    completion_tokens = completion_tokens or (lambda body: 5)

    def respond(body: dict[str, Any]) -> Reply:
        reply = answer(body)
        usage = cache.serve(body.get("model", ""), body, completion_tokens(body), store=not reply.delay)
        if reply.delay:
            time.sleep(reply.delay)
            cache.store(body.get("model", ""), body)
            reply = Reply(reply.body, reply.status, reply.headers)
        if cache.flavor == "anthropic":
            return Reply(anthropic_message(reply.body or {}, usage), reply.status, reply.headers, reply.delay)
        return Reply({**(reply.body or {}), "usage": usage}, reply.status, reply.headers, reply.delay)

    return respond


def caching_server(flavor: str = "openai", answer: Callable[[dict[str, Any]], Reply] | None = None,
                   completion_tokens: Callable[[dict[str, Any]], int] | None = None,
                   **rules: Any) -> tuple[LLMServer, PromptCache]:
    """`server, cache = caching_server("deepseek")`, then `with server: ...`."""
    cache = PromptCache(flavor=flavor, **rules)
    return LLMServer(caching_responder(cache, answer, completion_tokens)), cache
