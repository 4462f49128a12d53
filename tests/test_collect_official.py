"""An official-API student (`--student-provider`): the same agent through litellm, without token ids.

The providers are loopback servers speaking their own API (OpenAI chat completions; Anthropic
Messages, as documented: content blocks, `tool_use`, `stop_reason`), reached by litellm's real code
path with `api_base` pointed at them.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from collect.agent import run_agent
from collect.config import load_agent_spec
from collect.probe import probe
from collect.records import RolloutWriter
from collect.student import Backend, Student
from tests.collect_toy import FIX, scripted_student, toy_instance
from tests.llm_server import LLMServer, Reply
from tests.test_collect import CALC, FakeWorkspace, config

SPEC = load_agent_spec()


def anthropic_student(request: dict[str, Any]) -> Reply:
    """The FIX script as an Anthropic model: one step per assistant message so far."""
    messages = request.get("messages") or []
    if "connectivity check" in json.dumps(messages[:1]):
        step: Any = [{"name": "bash", "arguments": {"command": "echo ready"}}]
    else:
        turn = sum(message.get("role") == "assistant" for message in messages)
        step = FIX[turn] if turn < len(FIX) else "done"
    if isinstance(step, str):
        content, stop = [{"type": "text", "text": step}], "end_turn"
    else:
        content = [{"type": "tool_use", "id": f"toolu_{len(messages)}_{i}", "name": call["name"],
                    "input": call["arguments"]} for i, call in enumerate(step)]
        stop = "tool_use"
    return Reply({"id": f"msg_{len(messages)}", "type": "message", "role": "assistant",
                  "model": request["model"], "content": content, "stop_reason": stop, "stop_sequence": None,
                  "usage": {"input_tokens": 100, "output_tokens": 20}})


def roll(tmp_path: Path, url: str, provider: str, model: str) -> tuple[Any, list[dict], FakeWorkspace]:
    workspace = FakeWorkspace({"calc.py": CALC})
    path = tmp_path / "x.rollout.jsonl"
    with RolloutWriter(path) as writer:
        student = Student(config(tmp_path, url, student_provider=provider, student_model=model,
                                 api_key="sk-test"))
        result = run_agent(student, workspace, SPEC, toy_instance("toy__calc-1", "fix")["problem_statement"],
                           writer, 10, threading.Event())
    return result, [json.loads(line) for line in path.read_text().splitlines()], workspace


def test_an_openai_student_runs_the_agent_without_token_ids(tmp_path: Path) -> None:
    with LLMServer(scripted_student) as server:
        result, turns, workspace = roll(tmp_path, server.url, "openai", "gpt-test")
        info = probe(Backend(server.url, "sk-test", "openai"), "gpt-test", SPEC, {})
    assert (result.exit_status, result.turns, result.turns_with_token_ids) == ("submitted", 4, 0)
    assert "return a + b" in workspace.files["calc.py"]
    assert all(t["prompt_token_ids"] is None and t["logprobs"] is None for t in turns)
    sent = server.requests[0]
    assert sent["model"] == "gpt-test" and "return_token_ids" not in sent and "logprobs" not in sent
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    assert (info.tool_calls, info.token_ids, info.max_model_len) == ("parsed", False, None)


def test_an_anthropic_student_speaks_the_messages_api(tmp_path: Path) -> None:
    with LLMServer(anthropic_student) as server:
        result, turns, workspace = roll(tmp_path, server.url.removesuffix("/v1"), "anthropic", "claude-test")
    assert (result.exit_status, result.turns) == ("submitted", 4)
    assert "return a + b" in workspace.files["calc.py"]
    first = server.requests[0]
    assert first["model"] == "claude-test" and first["system"]                      # Anthropic's own form
    assert [tool["name"] for tool in first["tools"]] == ["bash", "edit"]
    second = server.requests[1]["messages"]
    assert second[-1]["content"][0]["type"] == "tool_result"                        # litellm translated
    assert server.headers[0]["x-api-key"] == "sk-test"
    assert turns[1]["messages"][2]["tool_calls"][0]["id"] == "toolu_1_0"
    assert turns[-1]["response"]["content"] == "add() subtracted; it adds now."
