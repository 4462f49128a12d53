"""agent-lightning 1.0's Gateway: its rollouts and their events → rollouts (pure).

A Gateway export (ingestion/agent_lightning/export.py writes it, from a live Gateway) is JSON Lines: a
header `{"type": "agl_gateway_export", "version": 1, "gateway": URL}`, one `{"type": "agl_rollout",
"rollout": <GET /api/rollouts/{id}>, "events": <GET /api/rollouts/{id}/events>}` per terminal rollout,
and `{"type": "agl_export_end", "rollouts": N}`. The events are the Gateway's, unchanged
(`agentlightning/schemas.py`): a `model_request` per proxied call (`model`, `request` = the body sent,
`response` = the body returned, with `prompt_token_ids` and each choice's `token_ids` and `logprobs`
when vLLM returns them, `http_status`, `status`, `usage`, `finish_reason`); `reward` events (`value`,
`source`, `reason`; the last one counts, as the Gateway's own trainer takes it); any other event type
passes through to the states' metadata (`events`).

The events route serves one attempt per rollout (its `last_attempt_id`, else "0"); the others the
rollout lists cannot be fetched through the API and are counted (`skipped_traces.agl_other_attempt`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ingestion.agent_lightning.calls import Call, Rollout, logprob_values, token_ids

SOURCE = "agl_gateway"
EXPORT = "agl_gateway_export"
ROLLOUT = "agl_rollout"
END = "agl_export_end"
VERSION = 1
WELL_KNOWN = ("model_request", "reward")


def event_call(data: dict[str, Any]) -> tuple[Call | None, str | None]:
    """The call a `model_request` event records, or (None, why it is no state).

    >>> event_call({"status": "error", "http_status": 400, "request": {}, "response": {}})
    (None, 'agl_failed_call')
    >>> event_call({"request": {"prompt": "x"}, "response": {"choices": [{"text": "y"}]}})
    (None, 'agl_completions_call')
    """
    status = data.get("http_status")
    if data.get("status") == "error" or (isinstance(status, int) and status >= 400):
        return None, "agl_failed_call"
    request, response = data.get("request"), data.get("response")
    if not isinstance(request, dict) or not isinstance(response, dict):
        return None, "agl_event_without_body"
    if not isinstance(request.get("messages"), list):
        return None, "agl_completions_call"   # /completions: a text prompt, no conversation to replay
    choices = response.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    message = choice.get("message") if choice else None
    if not isinstance(message, dict):
        return None, "agl_event_without_response"
    model = data.get("model") or response.get("model")
    usage = data.get("usage") or response.get("usage")
    return Call(request=request, message=message, model=model if isinstance(model, str) else None,
                finish_reason=choice.get("finish_reason") if choice else None,
                prompt_token_ids=token_ids(response.get("prompt_token_ids")
                                           or choice.get("prompt_token_ids")),
                completion_token_ids=token_ids(choice.get("token_ids")),
                logprobs=logprob_values(choice.get("logprobs")),
                usage=usage if isinstance(usage, dict) else None,
                extra={"response_id": response.get("id"), "model_version": data.get("model_version")}), None


def reward_value(data: dict[str, Any]) -> float | None:
    """A reward event's value.

    >>> reward_value({"value": 1}), reward_value({"value": "x"})
    (1.0, None)
    """
    value = data.get("value")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def gateway_rollout(record: dict[str, Any], gateway: str | None, skipped: Counter[str],
                    traces: Counter[str]) -> Rollout | None:
    """One exported rollout (`{"rollout": detail, "events": [...]}`), or None when it is no trace (counted
    in `traces`); calls that are no state are counted in `skipped`."""
    detail, events = record.get("rollout"), record.get("events")
    rollout = detail.get("rollout") if isinstance(detail, dict) else None
    if not isinstance(rollout, dict) or not isinstance(rollout.get("rollout_id"), str) \
            or not isinstance(events, list):
        traces["agl_bad_rollout_record"] += 1
        return None
    status = rollout.get("status") if isinstance(rollout.get("status"), dict) else {}
    attempts = detail.get("attempts") if isinstance(detail.get("attempts"), list) else []
    attempt = status.get("last_attempt_id") or "0"
    others = sum(1 for a in attempts if a != attempt)
    if others:
        traces["agl_other_attempt"] += others
    calls: list[Call] = []
    reward = None
    custom = []
    for event in events:
        kind = event.get("event_type") if isinstance(event, dict) else None
        data = event.get("data") if isinstance(event, dict) else None
        if not isinstance(data, dict):
            skipped["agl_bad_event"] += 1
        elif kind == "model_request":
            call, why = event_call(data)
            if call is None:
                skipped[why or "agl_bad_event"] += 1
            else:
                calls.append(call)
        elif kind == "reward":
            reward = reward_value(data) if reward_value(data) is not None else reward
        else:
            custom.append({"event_type": kind, "data": data})
    if not calls:
        traces["agl_no_calls"] += 1
        return None
    is_train = rollout.get("is_train")
    metadata = {"gateway": gateway, "mode": "train" if is_train else "val" if is_train is False else None,
                "input": rollout.get("input"), "events": custom}
    return Rollout(source=SOURCE, rollout_id=rollout["rollout_id"], attempt_id=attempt, calls=calls,
                   reward=reward, exit_status=status.get("state"), metadata=metadata)
