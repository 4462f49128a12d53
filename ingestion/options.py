"""Ingestion settings: which traces to read and how much of each to keep."""

from __future__ import annotations

from ingestion.schema import StrictModel

# A 128k-token teacher: leave room for the system prompt, the tool schemas and the answer.
DEFAULT_MAX_PROMPT_TOKENS = 100_000
DEFAULT_MAX_MESSAGE_CHARS = 40_000
CHARS_PER_TOKEN = 4  # a cheap, tokenizer-free estimate; good enough to stay under a budget


class IngestOptions(StrictModel):
    include_subagents: bool = False
    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS
    max_states: int | None = None
