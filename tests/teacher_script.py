"""Deterministic scripted teachers for end-to-end runs: the answer depends only on (model, prompt)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.llm_server import Reply, chat_completion

COMMANDS = ["ls -la", "pytest -q", "git status"]


def request_key(body: dict[str, Any]) -> str:
    """Which (teacher, state) a request is: the model and the whole prompt."""
    return hashlib.sha256(json.dumps([body.get("model"), body.get("messages")], sort_keys=True).encode()
                          ).hexdigest()


def prompt_hash(body: dict[str, Any]) -> int:
    return int(hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest(), 16)


def scripted(body: dict[str, Any], agreeing: tuple[str, ...] = ()) -> Reply:
    """Models named in `agreeing` always agree with each other; the rest pick by prompt and name."""
    model = body.get("model", "")
    h = prompt_hash(body)
    choice = h % len(COMMANDS) if model in agreeing else (h + sum(map(ord, model))) % len(COMMANDS)
    return Reply(chat_completion(tool_calls=[{"name": "Bash", "arguments": {
        "command": COMMANDS[choice], "description": f"asked by {model}"}}], model=model))
