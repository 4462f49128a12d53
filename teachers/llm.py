"""The one place litellm is imported: lazily, offline-safe and quiet."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def load_litellm() -> Any:
    """litellm, configured for batch use; importing it costs ~3 s, so only callers that need it pay.

    >>> load_litellm().__name__
    'litellm'
    """
    # Without this litellm fetches its cost map from GitHub at import (and retries for seconds offline);
    # the copy bundled with the pinned version is what the report's prices come from.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    # litellm prints a "Give Feedback / Get Help" banner to stdout on every exception; one teacher
    # failing is routine here and is already counted.
    litellm.suppress_debug_info = True
    # token_counter downloads Hugging Face tokenizers for llama/cohere/claude-2 names (23 s of retries
    # offline, measured); a dry run must never touch the network, so those fall back to tiktoken,
    # which litellm bundles. An explicit user choice (True/False) is left alone.
    if litellm.disable_hf_tokenizer_download is None:
        litellm.disable_hf_tokenizer_download = True
    return litellm
