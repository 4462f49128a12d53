"""Ingestion settings: which traces to read and how much of each to keep."""

from __future__ import annotations

from ingestion.schema import StrictModel
from ingestion.scope import Scope

# A 128k-token teacher: leave room for the system prompt, the tool schemas and the answer.
DEFAULT_MAX_PROMPT_TOKENS = 100_000
DEFAULT_MAX_MESSAGE_CHARS = 40_000
CHARS_PER_TOKEN = 4  # a cheap, tokenizer-free estimate; good enough to stay under a budget
# With --max-length N: N // COMPLETION_SHARE tokens are kept free for the completion (chosen or
# rejected; the student's own action when it is longer), and no single message may be longer than
# N // MESSAGE_SHARE tokens (cut to head + tail, the same cut in every state of a trace).
COMPLETION_SHARE = 8
MESSAGE_SHARE = 8


class IngestOptions(StrictModel):
    include_subagents: bool = False
    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS
    max_states: int | None = None
    # The training length (tokens): prompt + tools + the longer of chosen and rejected must fit it.
    max_length: int | None = None
    # Counts tokens for max_length / max_prompt_tokens; None: CHARS_PER_TOKEN characters per token.
    tokenizer: str | None = None
    # Processes that read files at once (replay/ingest/parallel.py); None: one per core on large sources.
    workers: int | None = None
    # --project / --exclude-project / --since / --until (ingestion/scope.py); None: every state is read.
    scope: Scope | None = None

    def message_limit(self) -> int:
        """Characters a message may have before it is cut to head + tail.

        >>> IngestOptions().message_limit(), IngestOptions(max_length=8192).message_limit()
        (40000, 4096)
        """
        if self.max_length is None:
            return self.max_message_chars
        return min(self.max_message_chars, self.max_length // MESSAGE_SHARE * CHARS_PER_TOKEN)

    def completion_reserve(self) -> int:
        """Tokens kept free for the completion under --max-length (0 without it).

        >>> IngestOptions(max_length=8192).completion_reserve()
        1024
        """
        return 0 if self.max_length is None else self.max_length // COMPLETION_SHARE
