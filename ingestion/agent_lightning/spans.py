"""agent-lightning 0.3 span streams (the seed example's `stream_<instance_id>.json`) → rollouts (pure).

Each line is one `Span.model_dump()` of `store.query_spans(rollout_id)`. An LLM call through the LLM
proxy leaves ~12 spans sharing a `sequence_id`; the training data is in the one named
`raw_gen_ai_request`, whose attributes `llm.<provider>.<key>` (litellm's provider: `hosted_vllm`,
`openai`, …; any is read) hold the request (`messages`, `tools`, sampling) and the response (`choices`,
`usage`, `model`, `prompt_token_ids`, …) as Python-repr strings. A call the backend refused leaves no
such span, only `litellm_request` / `Received Proxy Server Request` with status ERROR: counted. The
reward is the last `agentlightning.annotation` span's `agentlightning.reward.0.value` (agent-lightning's
`find_final_reward`); the rollout's other `agentlightning.*` spans (`emit_message`, `emit_object`, …)
pass through to the states' metadata (`events`: name and attributes).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ingestion.agent_lightning.calls import Call, Rollout, logprob_values, token_ids

SOURCE = "agl_spans"
RAW_REQUEST = "raw_gen_ai_request"
REWARD_SPAN = "agentlightning.annotation"
REWARD_KEY = "agentlightning.reward.0.value"
CUSTOM_PREFIX = "agentlightning."
FAILED_SPANS = ("litellm_request", "Received Proxy Server Request")
# What litellm's raw request span holds of the response; every other `llm.<provider>.*` key is the request.
RESPONSE_KEYS = {"id", "object", "created", "model", "choices", "usage", "prompt_token_ids", "service_tier",
                 "system_fingerprint", "prompt_logprobs", "prompt_text", "kv_transfer_params",
                 "ec_transfer_params", "metrics"}
_PROVIDER = re.compile(r"^llm\.([^.]+)\.(messages|prompt)$")


def literal(value: Any) -> Any:
    """An attribute's value: litellm writes dicts and lists as Python reprs, None as ''.

    >>> literal("[{'role': 'user', 'content': 'hi'}]"), literal(""), literal("plain text"), literal(3)
    ([{'role': 'user', 'content': 'hi'}], None, 'plain text', 3)
    """
    if not isinstance(value, str):
        return value
    if value == "":
        return None
    if value[:1] in "[{(" or value in ("None", "True", "False"):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return value
    return value


def provider_of(attributes: dict[str, Any]) -> tuple[str | None, str | None]:
    """The provider prefix of a raw request span and what it asked with (`messages`, or `prompt` for a
    /completions call), or (None, None).

    >>> provider_of({"llm.acme.messages": "[]"}), provider_of({"llm.openai.prompt": "x"}), provider_of({})
    (('acme', 'messages'), ('openai', 'prompt'), (None, None))
    """
    for key in attributes:
        found = _PROVIDER.match(key)
        if found:
            return found.group(1), found.group(2)
    return None, None


def raw_call(attributes: dict[str, Any]) -> tuple[Call | None, str | None]:
    """The call a `raw_gen_ai_request` span records, or (None, why not)."""
    provider, asked = provider_of(attributes)
    if provider is None:
        return None, "agl_span_without_request"
    if asked == "prompt":
        return None, "agl_completions_call"
    prefix = f"llm.{provider}."
    fields = {key[len(prefix):]: literal(value) for key, value in attributes.items()
              if key.startswith(prefix)}
    choices = fields.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    messages = fields.get("messages")
    if choice is None or not isinstance(messages, list):
        return None, "agl_span_without_response"
    message = choice.get("message") or choice.get("delta")   # a stream the proxy did not join: as stored
    if not isinstance(message, dict):
        return None, "agl_span_without_response"
    request = {key: value for key, value in fields.items() if key not in RESPONSE_KEYS and value is not None}
    usage = fields.get("usage")
    model = fields.get("model")
    return Call(request=request, message=message, model=model if isinstance(model, str) else None,
                finish_reason=choice.get("finish_reason"),
                prompt_token_ids=token_ids(fields.get("prompt_token_ids") or choice.get("prompt_token_ids")),
                completion_token_ids=token_ids(choice.get("token_ids")),
                logprobs=logprob_values(choice.get("logprobs")),
                usage=usage if isinstance(usage, dict) else None,
                extra={"provider": provider, "response_id": fields.get("id")}), None


def reward_of(span: dict[str, Any]) -> float | None:
    """The primary reward an annotation span carries.

    >>> reward_of({"name": "agentlightning.annotation", "attributes": {"agentlightning.reward.0.value": 1}})
    1.0
    """
    value = (span.get("attributes") or {}).get(REWARD_KEY)
    if span.get("name") != REWARD_SPAN or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def span_rollouts(spans: Iterable[dict[str, Any]], skipped: Counter[str]) -> list[Rollout]:
    """The rollouts of a stream's spans (one per `rollout_id`, in order of appearance); calls in
    (sequence_id, start_time) order, as agent-lightning's own adapter orders them. `skipped` counts the
    calls that are no state, by reason."""
    by_rollout: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_rollout.setdefault(str(span.get("rollout_id")), []).append(span)
    return [_rollout(rollout_id, group, skipped) for rollout_id, group in by_rollout.items()]


def _order(span: dict[str, Any]) -> tuple[float, float]:
    sequence, start = span.get("sequence_id"), span.get("start_time")
    return (sequence if isinstance(sequence, int | float) else 0.0,
            start if isinstance(start, int | float) else 0.0)


def _rollout(rollout_id: str, spans: list[dict[str, Any]], skipped: Counter[str]) -> Rollout:
    spans = sorted(spans, key=_order)
    calls: list[Call] = []
    answered: set[Any] = set()
    responses: set[Any] = set()
    reward = None
    events = []
    for span in spans:
        found = reward_of(span)
        reward = found if found is not None else reward
        name = span.get("name")
        if found is None and isinstance(name, str) and name.startswith(CUSTOM_PREFIX):
            events.append({"name": name, "attributes": span.get("attributes") or {}})
        if name != RAW_REQUEST:
            continue
        answered.add(span.get("sequence_id"))
        call, why = raw_call(span.get("attributes") or {})
        if call is None:
            skipped[why or "agl_span_without_request"] += 1
            continue
        response_id = call.extra.get("response_id")
        if response_id is not None and response_id in responses:   # the adapter's dedup by request id
            skipped["agl_duplicate_call"] += 1
            continue
        responses.add(response_id)
        call.extra["sequence_id"] = span.get("sequence_id")
        calls.append(call)
    failed = {span.get("sequence_id") for span in spans if span.get("name") in FAILED_SPANS
              and (span.get("status") or {}).get("status_code") == "ERROR"} - answered
    if failed:
        skipped["agl_failed_call"] += len(failed)
    attempt = next((s.get("attempt_id") for s in spans if isinstance(s.get("attempt_id"), str)), None)
    return Rollout(source=SOURCE, rollout_id=rollout_id, attempt_id=attempt, calls=calls, reward=reward,
                   metadata={"events": events})
