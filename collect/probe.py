"""The start-up probe: one look at each student server before any container starts.

- `GET /models` (vLLM): the model is served under that name, and its `max_model_len`;
- one request with the agent's tools that asks for a call. vLLM 0.10 started without
  `--enable-auto-tool-choice` refuses `tool_choice: auto`; 0.12+ answers the call as text, and so does a
  server whose `--tool-call-parser` does not match the model. Either way no rollout could work: the run
  stops with one line naming the flags, before any rollout is counted (unless the reply was cut at the
  token limit, or its markup holds no call a parser could read: a model's fault, not the server's; the run
  goes on with a warning).

The answer also tells whether token ids come back and which reasoning field the server uses; all of
it goes into report.json (`servers`). A model that answers without a call proves nothing either way:
the run goes on, with a warning.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from pydantic import BaseModel

from collect.config import AgentSpec, CollectError
from collect.reply import find_markup
from collect.student import Backend, ContextOverflow, StudentError, ToolParsingOff

log = logging.getLogger("collect")
PROBE_MAX_TOKENS = 1024
TOOL_PARSER_HINT = ("start vLLM with --enable-auto-tool-choice --tool-call-parser PARSER for the model "
                    "(hermes: Qwen2.5, Qwen3; qwen3_coder: Qwen3-Coder; llama3_json: Llama 3; mistral: "
                    "Mistral, Devstral)")


class ServerInfo(BaseModel):
    """One student server, as the probe saw it and the run left it (report.json `servers`)."""

    url: str | None
    provider: str | None = None
    model: str
    max_model_len: int | None = None
    tool_calls: str = "unknown"            # parsed, or not_called (the model answered in text)
    token_ids: bool = False                # the probe's answer carried them
    reasoning_field: str | None = None
    token_extension_dropped: str | None = None   # the server's refusal, when the extension was dropped


def served_context(backend: Backend, model: str) -> int | None:
    """The model's max_model_len from GET /models; CollectError when the server serves other models."""
    try:
        cards = backend.served_models()
    except StudentError as exc:
        raise CollectError(str(exc)) from None
    if not cards:
        return None
    ids = [str(card.get("id")) for card in cards]
    if model not in ids:
        raise CollectError(f"the student server at {backend.name} serves {', '.join(ids)}, not {model} "
                           "(--student-model)")
    length = next(card.get("max_model_len") for card in cards if card.get("id") == model)
    return length if isinstance(length, int) else None


def probe(backend: Backend, model: str, spec: AgentSpec, sampling: dict[str, Any]) -> ServerInfo:
    """Check one server; a CollectError (one line) when no rollout could work against it."""
    info = ServerInfo(url=backend.url, provider=backend.provider, model=model)
    if backend.provider is None:
        info.max_model_len = served_context(backend, model)
    max_tokens = min(sampling.get("max_tokens") or PROBE_MAX_TOKENS, PROBE_MAX_TOKENS)
    request = {"model": model, "messages": [{"role": "user", "content": spec.probe_prompt}],
               "tools": spec.tools, "tool_choice": "auto", **sampling, "max_tokens": max_tokens}
    try:
        reply = backend.send(request)
    except ToolParsingOff as exc:
        raise CollectError(f"the student server at {backend.name} does not parse tool calls ({exc}): "
                           f"{TOOL_PARSER_HINT}") from None
    except ContextOverflow as exc:
        raise CollectError(f"the student server at {backend.name} refused a short request: {exc} "
                           "(is --max-tokens larger than the model's context?)") from None
    except StudentError as exc:
        raise CollectError(f"the student server failed the start-up check: {exc}") from None
    marker = find_markup(reply.message.get("content"), spec.tool_call_markers)
    # A reply cut at the token limit may stop inside its call, which no parser reads: that proves nothing
    # of the server (a small model with a short --max-tokens does it, e.g. SmolLM2 at 96 tokens).
    # Nor does markup no parser could read (a trained student that writes `<tool_call>bash rmash…`, #57's
    # bench after two DPO rounds): only a call a parser reads, answered as text, shows the parser is off.
    content = reply.message.get("content") or ""
    if (not reply.tool_calls and marker and reply.finish_reason != "length"
            and well_formed(content, marker)):
        raise CollectError(f"the student server at {backend.name} answered a tool call as text ({marker}), "
                           f"so it does not parse tool calls: {TOOL_PARSER_HINT}")
    info.tool_calls = "parsed" if reply.tool_calls else "not_called"
    if not reply.tool_calls:
        what = "tool-call markup no parser reads" if marker else "text"
        log.warning("%s: the start-up check asked for a tool call and got %s; tool parsing is unverified",
                    backend.name, what)
    info.token_ids = reply.completion_token_ids is not None
    info.reasoning_field = reply.reasoning_field
    info.token_extension_dropped = backend.dropped
    return info


def well_formed(content: str, marker: str) -> bool:
    """Whether the markup after `marker` holds a call a parser reads: a JSON object with a `name` (Hermes,
    Mistral, Llama 3), or Qwen3-Coder's `<function=NAME>`.

    >>> well_formed('<tool_call>\\n{"name": "bash", "arguments": {}}\\n</tool_call>', "<tool_call>")
    True
    >>> well_formed("<tool_call>bash rmash cmdcatbash<tool_call>bash", "<tool_call>")
    False
    """
    rest = content[content.find(marker) + len(marker):]
    if marker == "<function=":
        return re.match(r"[\w.-]+>", rest) is not None
    start = min((at for at in (rest.find("{"), rest.find("[")) if at >= 0), default=-1)
    if start < 0:
        return False
    try:
        value, _ = json.JSONDecoder().raw_decode(rest, start)
    except ValueError:
        return False
    items = value if isinstance(value, list) else [value]
    return any(isinstance(item, dict) and "name" in item for item in items)
