"""A teacher's answer as the cache stores it and as a proposal: pure conversions."""

from __future__ import annotations

import time
from typing import Any

import orjson

from ingestion.schema import Action, Proposal
from teachers.cache import CacheEntry
from teachers.client import parse_action
from teachers.cost import tokens_of
from teachers.registry import TeacherSpec


def answer_entry(teacher: TeacherSpec, body: dict[str, Any], sample: int, cost_usd: float) -> CacheEntry:
    """The cache row of an answer; `cost_usd` from its usage (`response_cost`, batch or not). A
    malformed answer gets `error` and no action (the pool asks it again and never stores it).

    >>> body = {"choices": [{"message": {"content": "Done."}}], "usage": {"prompt_tokens": 7}}
    >>> e = answer_entry(TeacherSpec(name="a", model="m"), body, 0, 0.5); e.action_json, e.prompt_tokens
    ('{"content":"Done.","tool_calls":[],"thinking":null}', 7)
    """
    choices = body.get("choices") or [{}]
    action, error = parse_action(choices[0].get("message") or {})
    tokens = tokens_of(body)
    return CacheEntry(model=teacher.model, sample=sample, response_json=orjson.dumps(body).decode(),
                      action_json=action.model_dump_json() if action else None, error=error,
                      prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
                      cost_usd=cost_usd, created=time.time())


def to_proposal(base: dict[str, Any], entry: CacheEntry, cached: bool) -> Proposal:
    """The proposal a cache row makes, `base` naming the state, teacher and sample.

    >>> base = {"state_id": "s", "teacher": "a", "model": "m"}
    >>> to_proposal(base, CacheEntry(model="m", action_json='{"content": "ok"}'), True).action.content
    'ok'
    """
    action = Action.model_validate_json(entry.action_json) if entry.action_json else None
    return Proposal(**base, action=action, error=entry.error, cached=cached,
                    prompt_tokens=entry.prompt_tokens, completion_tokens=entry.completion_tokens,
                    cost_usd=entry.cost_usd)
