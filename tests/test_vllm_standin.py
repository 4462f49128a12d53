"""The vLLM stand-in (tests/vllm_server.py) answers as the real server did on the same requests.

Each row's status and error text is what vLLM's CPU build 0.32.0 answered (bench/vllm_standin_diff.py, run
by hand against a real server: 0.33.0's source words them the same).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.vllm_server import VLLMConfig, VLLMServer

HELLO = [{"role": "user", "content": "Say hello."}]
BASH = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}


def ask(server: VLLMServer, path: str, body: Any) -> httpx.Response:
    return httpx.post(server.url.removesuffix("/v1") + path, json=body, timeout=30)


@pytest.mark.parametrize(("fields", "status", "message"), [
    ({"max_tokens": -1}, 400, "max_tokens must be at least 1, got -1. (parameter=max_tokens, value=-1)"),
    ({"temperature": -1}, 400,
     "temperature must be non-negative, got -1.0. (parameter=temperature, value=-1.0)"),
    ({"top_p": 2}, 400, "top_p must be in (0, 1], got 2.0. (parameter=top_p, value=2.0)"),
    ({"n": 0}, 400, "n must be at least 1, got 0."),
    ({"max_tokens": "many"}, 400, "1 validation error:\n  {'type': 'int_parsing', 'loc': 'body.max_tokens', "
     "'msg': 'Input should be a valid integer, unable to parse string as an integer', 'input': 'many'}"),
    ({"messages": []}, 400,
     "Cannot apply chat template to an empty conversation. Provide at least one message."),
    ({"tool_choice": "auto"}, 400, "When using `tool_choice`, `tools` must be set. (parameter=tool_choice)"),
    ({"model": "nobody"}, 404, "The model `nobody` does not exist. Valid aliases: student."),
    ({"messages": [{"role": "user", "content": "word " * 300}]}, 400,
     "This model's maximum context length is 100 tokens. However, your prompt contains at least 101 input "
     "tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input "
     "prompt. (parameter=input_tokens, value=101)"),
    ({"frobnicate": 1, "messages": [{"role": "robot", "content": "hi"}]}, 200, None),
])
def test_requests_are_refused_in_vllms_words(fields: dict[str, Any], status: int,
                                             message: str | None) -> None:
    config = VLLMConfig(model="student", max_model_len=100)
    with VLLMServer(lambda request: "Hello.", config) as server:
        answer = ask(server, "/v1/chat/completions", {"model": "student", "messages": HELLO, **fields})
    assert answer.status_code == status
    assert (answer.json()["error"]["message"] if status != 200 else None) == message


def test_lora_adapters_load_answer_and_unload(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text("{}")
    load = {"lora_name": "round-1", "lora_path": str(tmp_path)}
    chat = {"model": "round-1", "messages": HELLO, "max_tokens": 8}
    with VLLMServer(lambda request: "Hi.", VLLMConfig(model="student", lora_updates=True)) as server:
        assert ask(server, "/v1/load_lora_adapter", load).text == \
            "Success: LoRA adapter 'round-1' added successfully."
        assert ask(server, "/v1/load_lora_adapter", load).json()["error"]["type"] == "InvalidUserInput"
        cards = httpx.get(f"{server.url}/models").json()["data"]
        assert [(c["id"], c["parent"]) for c in cards] == [("student", None), ("round-1", "student")]
        assert ask(server, "/v1/chat/completions", chat).json()["model"] == "round-1"
        assert ask(server, "/v1/unload_lora_adapter", {"lora_name": "round-1"}).status_code == 200
        assert ask(server, "/v1/chat/completions", chat).status_code == 404
        assert ask(server, "/v1/unload_lora_adapter", {"lora_name": "round-1"}).status_code == 404
    with VLLMServer(lambda request: "Hi.", VLLMConfig(model="student")) as server:   # routes off by default
        assert ask(server, "/v1/load_lora_adapter", load).json() == {"detail": "Not Found"}


@pytest.mark.parametrize(("choice", "content", "finish"), [
    ("auto", None, "tool_calls"), ("required", "", "tool_calls"),
    ({"type": "function", "function": {"name": "bash"}}, "", "stop")])
def test_a_whole_call_is_read_for_every_tool_choice(choice: Any, content: str | None, finish: str) -> None:
    written = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    with VLLMServer(lambda request: written, VLLMConfig(model="student", reasoning_parser=False)) as server:
        body = ask(server, "/v1/chat/completions", {"model": "student", "messages": HELLO, "tools": [BASH],
                                                    "tool_choice": choice}).json()
    choice_out = body["choices"][0]
    assert (choice_out["message"]["content"], choice_out["finish_reason"]) == (content, finish)
    call = choice_out["message"]["tool_calls"][0]["function"]
    assert call == {"name": "bash", "arguments": '{"command": "ls"}'}
