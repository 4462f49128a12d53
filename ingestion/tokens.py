"""Counting tokens: a Hugging Face tokenizer when the run names one (`--tokenizer`), else an estimate of
`CHARS_PER_TOKEN` characters per token; plus `MESSAGE_OVERHEAD` tokens per message for what a chat
template adds around it. Used by ingestion's budgets and by the export's length re-check, so both judge
a row the same way."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from ingestion.options import CHARS_PER_TOKEN
from ingestion.schema import ReplayError

MESSAGE_OVERHEAD = 8  # tokens a chat template adds around one message (role markers, separators)


@lru_cache(maxsize=4)
def load_tokenizer(name: str) -> Any:
    """A Hugging Face tokenizer from a local path or Hub name (loaded once per run)."""
    if name.startswith(("/", ".", "~")) and not Path(name).expanduser().exists():
        raise ReplayError(f"tokenizer {name}: no such folder")
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(Path(name).expanduser()) if name.startswith("~") else name)
    except Exception as error:  # ImportError, OSError, ValueError, HTTP errors: one line says it
        raise ReplayError(f"tokenizer {name}: cannot load it ({type(error).__name__}: "
                          f"{str(error).splitlines()[0] if str(error) else ''})") from None


class TokenCounter:
    """Tokens of texts and messages: a tokenizer's count, else CHARS_PER_TOKEN characters per token.

    >>> counter = TokenCounter()
    >>> counter.text("x" * 41), counter.message({"role": "user", "content": "x" * 40})
    (11, 18)
    """

    def __init__(self, tokenizer: Any = None) -> None:
        self.tokenizer = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
        # The name report.json and the card show: a Hub name, or a local folder's last part.
        name = str(getattr(self.tokenizer, "name_or_path", "") or "tokenizer")
        self.name = "estimate" if tokenizer is None else Path(name).name if Path(name).exists() else name
        self.text: Callable[[str], int] = (lru_cache(maxsize=1 << 16)(self._tokenized)
                                           if self.tokenizer is not None else _estimated)

    def _tokenized(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False)) if text else 0

    def message(self, message: dict[str, Any]) -> int:
        """Tokens of one message as a chat template renders it: text, tool calls, overhead."""
        tokens = self.text(message.get("content") or "") + MESSAGE_OVERHEAD
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            tokens += self.text(str(function.get("name") or "")) + self.text(_json(function.get("arguments")))
        return tokens

    def tools(self, tools: list[dict[str, Any]] | None) -> int:
        return self.text(_json(tools)) if tools else 0


def _estimated(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


@lru_cache(maxsize=4)
def counter_for(tokenizer: str | None) -> TokenCounter:
    """One counter per tokenizer per process (loading a tokenizer takes a while)."""
    return TokenCounter(tokenizer)
