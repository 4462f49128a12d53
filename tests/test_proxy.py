"""The recording Anthropic proxy, through real HTTP: the anthropic SDK → collect.proxy → a loopback
OpenAI-compatible server that answers like vLLM (prompt_token_ids, token_ids, logprobs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from collect.proxy import AnthropicProxy, ProxyConfig, ProxyError
from tests.collect_toy import vllm_body
from tests.llm_server import LLMServer, Reply, chat_completion, error_body

BASH = {"name": "Bash", "description": "Run a command", "input_schema": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
LS = [{"name": "Bash", "arguments": {"command": "ls"}}]


def config(url: str, **extra: Any) -> ProxyConfig:
    fields = {"backend_url": url, "default_backend": "student", "models": {"claude-haiku-4-5": "small"},
              "main_models": ["claude-sonnet-4-6"], "max_retries": 0, **extra}
    return ProxyConfig(**fields)


@pytest.fixture
def backend() -> Iterator[LLMServer]:
    def respond(request: dict[str, Any]) -> Reply:
        step = LS if request.get("tools") else "A title"
        return Reply(vllm_body(step, 0, with_tokens=bool(request.get("return_token_ids"))))

    with LLMServer(respond) as server:
        yield server


@pytest.fixture
def proxy(backend: LLMServer) -> Iterator[AnthropicProxy]:
    with AnthropicProxy(config(backend.url)) as running:
        yield running


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="dummy", max_retries=0)


def ask(url: str, **extra: Any) -> Any:
    params = {"model": "claude-sonnet-4-6", "max_tokens": 8000, "tools": [BASH],
              "messages": [{"role": "user", "content": "list the files"}], **extra}
    return client(url).messages.with_raw_response.create(**params)


def test_a_turn_is_translated_answered_and_recorded(tmp_path: Path, proxy: AnthropicProxy,
                                                    backend: LLMServer) -> None:
    raw = ask(proxy.route("k1", tmp_path / "proxy.jsonl"), system="You are terse.")
    message = raw.parse()
    [record] = records(tmp_path / "proxy.jsonl")
    assert (message.id, raw.headers["request-id"]) == (record["message_id"], record["request_id"])
    assert record["message_id"] == f"msg_{record['id']}" and message.model == "claude-sonnet-4-6"
    assert [(b.type, b.name, b.input) for b in message.content] == [("tool_use", "Bash", {"command": "ls"})]
    assert message.stop_reason == "tool_use"

    sent = backend.requests[0]
    assert (sent["model"], sent["return_token_ids"], sent["logprobs"]) == ("student", True, True)
    assert "max_tokens" not in sent                      # the CLI's (32000) would overflow a vLLM context
    assert sent["messages"][0]["role"] == "system" and "terse" in json.dumps(sent["messages"][0])
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["Bash"]
    assert (record["role"], record["side_reason"], record["model"], record["backend_model"]) == (
        "main", None, "claude-sonnet-4-6", "student")
    assert record["request"]["messages"] == sent["messages"]
    assert record["prompt_token_ids"] == list(range(1, 21))
    assert record["completion_token_ids"] == [1000, 1001, 1002]
    assert record["logprobs"] == [-0.125, -0.25, -0.375]
    assert record["response"]["tool_calls"][0]["function"]["name"] == "Bash"
    assert record["anthropic_response"]["content"][0]["input"] == {"command": "ls"}
    assert record["status"] == 200 and record["error"] is None and record["latency_s"] >= 0


def test_a_stream_gets_sse_events_of_the_whole_answer(tmp_path: Path, proxy: AnthropicProxy) -> None:
    url = proxy.route("k1", tmp_path / "proxy.jsonl")
    params = {"model": "claude-sonnet-4-6", "max_tokens": 100, "tools": [BASH],
              "messages": [{"role": "user", "content": "list the files"}]}
    with client(url).messages.stream(**params) as stream:
        kinds = [event.type for event in stream]
        message = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and "content_block_delta" in kinds
    assert [(b.type, b.input) for b in message.content] == [("tool_use", {"command": "ls"})]
    [record] = records(tmp_path / "proxy.jsonl")
    assert record["stream"] is True and message.id == record["message_id"]


def test_the_history_reaches_the_backend_in_openai_form(tmp_path: Path, proxy: AnthropicProxy,
                                                        backend: LLMServer) -> None:
    history = [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."},
                                          {"type": "tool_use", "id": "call_1", "name": "Bash",
                                           "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "a.py"}]},
    ]
    ask(proxy.route("k1", tmp_path / "proxy.jsonl"), messages=history)
    sent = backend.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["function"] == {"name": "Bash", "arguments": '{"command": "ls"}'}
    assert (sent[2]["tool_call_id"], sent[2]["content"]) == ("call_1", "a.py")


@pytest.mark.parametrize(("model", "tools", "role", "reason", "backend_model"), [
    ("claude-sonnet-4-6", [BASH], "main", None, "student"),
    ("claude-haiku-4-5", [BASH], "side", "small_model", "small"),
    ("claude-sonnet-4-6", [], "side", "no_tools", "student"),
    ("claude-opus-4-1", [BASH], "side", "small_model", "student"),     # any other name: the default backend
])
def test_side_requests_are_tagged(tmp_path: Path, proxy: AnthropicProxy, backend: LLMServer, model: str,
                                  tools: list[dict], role: str, reason: str | None,
                                  backend_model: str) -> None:
    extra = {"tools": tools} if tools else {"tools": anthropic.NOT_GIVEN}
    ask(proxy.route("k1", tmp_path / "proxy.jsonl"), model=model, **extra)
    [record] = records(tmp_path / "proxy.jsonl")
    assert (record["role"], record["side_reason"], record["backend_model"]) == (role, reason, backend_model)
    assert backend.requests[0]["model"] == backend_model
    assert ("tool_choice" in backend.requests[0]) <= bool(tools)   # never a tool_choice without tools


def test_sampling_flags_replace_the_clis(tmp_path: Path, backend: LLMServer) -> None:
    with AnthropicProxy(config(backend.url, temperature=0.5, max_tokens=256)) as proxy:
        ask(proxy.route("k1", tmp_path / "proxy.jsonl"), extra_body={"temperature": 1.0})
    assert (backend.requests[0]["temperature"], backend.requests[0]["max_tokens"]) == (0.5, 256)


def test_each_route_sends_its_own_sampling_on_top_of_the_runs(tmp_path: Path, backend: LLMServer) -> None:
    """A rollout's seed (collect.run --seed) goes with its requests only."""
    with AnthropicProxy(config(backend.url, temperature=0.5)) as proxy:
        ask(proxy.route("s0", tmp_path / "a.jsonl", {"seed": 11}))
        ask(proxy.route("s1", tmp_path / "b.jsonl", {"seed": 12}))
        ask(proxy.route("plain", tmp_path / "c.jsonl"))
    sent = [(r["temperature"], r.get("seed")) for r in backend.requests]
    assert sent == [(0.5, 11), (0.5, 12), (0.5, None)]
    recorded = [records(tmp_path / f"{name}.jsonl")[0]["request"].get("seed") for name in "abc"]
    assert recorded == [11, 12, None]


def test_a_server_without_the_token_extension_is_asked_again_plainly(tmp_path: Path) -> None:
    def respond(request: dict[str, Any]) -> Reply:
        if "return_token_ids" in request:
            rejected = error_body("Unknown parameter: return_token_ids", "invalid_request_error")
            return Reply(rejected, status=400)
        return Reply(chat_completion("done", model="student"))

    with LLMServer(respond) as server, AnthropicProxy(config(server.url)) as proxy:
        url = proxy.route("k1", tmp_path / "proxy.jsonl")
        first, second = ask(url).parse(), ask(url).parse()
        assert proxy.extension is False
    assert first.content[0].text == second.content[0].text == "done"
    assert len(server.requests) == 3                     # once with the extension, then plainly for good
    assert [r["completion_token_ids"] for r in records(tmp_path / "proxy.jsonl")] == [None, None]


@pytest.mark.parametrize(("reply", "status", "kind", "why"), [
    (Reply(error_body("context too long", "invalid_request_error"), status=400), 400, "invalid_request_error",
     "the student rejected the request"),
    (Reply(error_body("boom"), status=500), 502, "api_error", "the student answered HTTP 500"),
    (Reply({"choices": []}), 502, "api_error", "the student's response cannot be used"),
])
def test_backend_failures_become_anthropic_errors(tmp_path: Path, reply: Reply, status: int, kind: str,
                                                  why: str) -> None:
    with LLMServer(lambda request: reply) as server, AnthropicProxy(config(server.url)) as proxy:
        with pytest.raises(anthropic.APIStatusError) as caught:
            ask(proxy.route("k1", tmp_path / "proxy.jsonl"))
    assert caught.value.status_code == status
    error = caught.value.body["error"]
    assert error["type"] == kind and why in error["message"]
    [record] = records(tmp_path / "proxy.jsonl")
    assert record["status"] == status and why in record["error"]


def test_an_unreachable_backend_is_a_502_naming_it(tmp_path: Path) -> None:
    with AnthropicProxy(config("http://127.0.0.1:9/v1")) as proxy:
        url = proxy.route("k1", tmp_path / "proxy.jsonl")
        with pytest.raises(anthropic.InternalServerError) as caught:
            ask(url)
        writer = proxy.unroute("k1")
    assert caught.value.status_code == 502
    assert "cannot reach the student at http://127.0.0.1:9/v1" in caught.value.body["error"]["message"]
    assert writer is not None and writer.counts["errors"] == 1 and writer.counts["main"] == 0


def test_each_route_has_its_own_file_and_unknown_routes_are_404(tmp_path: Path,
                                                                 proxy: AnthropicProxy) -> None:
    ask(proxy.route("a.1", tmp_path / "a.jsonl"))
    ask(proxy.route("b.2", tmp_path / "b.jsonl"))
    ask(f"{proxy.url}/b.2")
    assert (len(records(tmp_path / "a.jsonl")), len(records(tmp_path / "b.jsonl"))) == (1, 2)
    with pytest.raises(anthropic.NotFoundError):
        ask(f"{proxy.url}/nobody")
    proxy.unroute("a.1")
    with pytest.raises(anthropic.NotFoundError):
        ask(f"{proxy.url}/a.1")


def test_count_tokens_and_bad_bodies(tmp_path: Path, proxy: AnthropicProxy) -> None:
    url = proxy.route("k1", tmp_path / "proxy.jsonl")
    counted = client(url).messages.count_tokens(model="claude-sonnet-4-6",
                                                messages=[{"role": "user", "content": "x" * 400}])
    assert 100 <= counted.input_tokens <= 120
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{url}/v1/messages", data=b"[1, 2]", method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 400
    assert json.loads(caught.value.read())["error"]["type"] == "invalid_request_error"
    assert not (tmp_path / "proxy.jsonl").read_text()        # nothing was asked of the backend


def test_a_taken_port_is_a_proxy_error(backend: LLMServer) -> None:
    with AnthropicProxy(config(backend.url)) as first:
        with pytest.raises(ProxyError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            AnthropicProxy(config(backend.url), port=first.port).start()


# --- against vLLM-shaped servers (tests/vllm_server.py) ---------------------------------------------------

def thinking_student(request: dict[str, Any]) -> str:
    """Thinks, then calls Bash; after one tool result, thinks and answers."""
    from tests.vllm_server import assistant_text

    if not request.get("tools"):
        return "A title"
    turn = sum(message.get("role") == "assistant" for message in request["messages"])
    if turn == 0:
        return assistant_text("", [{"name": "Bash", "arguments": {"command": "ls"}}], reasoning="List first.")
    return assistant_text("Done.", reasoning="Seen enough.")


@pytest.mark.parametrize("version", ["0.10", "0.33"])
def test_reasoning_reaches_the_cli_as_thinking_and_goes_back_as_the_server_reads_it(
        tmp_path: Path, version: str) -> None:
    from tests.vllm_server import VLLMConfig, VLLMServer

    with VLLMServer(thinking_student, VLLMConfig(version=version)) as server, \
            AnthropicProxy(config(server.url)) as proxy:
        url = proxy.route("k1", tmp_path / "proxy.jsonl")
        first = ask(url).parse()
        history = [{"role": "user", "content": "list the files"},
                   {"role": "assistant", "content": [block.model_dump() for block in first.content]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[-1].id,
                                                 "content": "a.py"}]}]
        second = ask(url, messages=history).parse()
        sent = server.requests[1]["messages"][1]
    # vLLM 0.10 returns the blank text before the call as content ("\n\n": a text block); 0.33's
    # parsers blank it (content null: no text block) -- tests/vllm_formats.py, read from the wheels
    middle = ["text"] if version == "0.10" else []
    assert [block.type for block in first.content] == ["thinking", *middle, "tool_use"]
    assert first.content[0].thinking == "\nList first.\n"
    assert [block.type for block in second.content] == ["thinking", "text"]
    if version == "0.33":
        assert sent["reasoning"] == "\nList first.\n" and "reasoning_content" not in sent
    else:
        assert sent["content"].startswith("<think>\nList first.\n</think>") and "reasoning" not in sent
    one, two = records(tmp_path / "proxy.jsonl")
    prefix = one["prompt_token_ids"] + one["completion_token_ids"]
    assert two["prompt_token_ids"][:len(prefix)] == prefix       # the second prompt extends the first


def test_the_small_model_can_be_served_by_a_second_server(tmp_path: Path, backend: LLMServer) -> None:
    def refuses(request: dict[str, Any]) -> Reply:
        if "return_token_ids" in request:
            return Reply(error_body("Unrecognized request argument supplied: return_token_ids",
                                    "invalid_request_error"), status=400)
        return Reply(chat_completion("A title", model="small"))

    with LLMServer(refuses) as small, \
            AnthropicProxy(config(backend.url, urls={"claude-haiku-4-5": small.url})) as proxy:
        url = proxy.route("k1", tmp_path / "proxy.jsonl")
        ask(url, model="claude-haiku-4-5", tools=anthropic.NOT_GIVEN)
        ask(url)
        dropped = {u: b.dropped for u, b in proxy.backends.items()}
    side, main = records(tmp_path / "proxy.jsonl")
    assert (side["backend_url"], side["backend_model"]) == (small.url, "small")
    assert side["completion_token_ids"] is None
    assert (main["backend_url"], main["completion_token_ids"]) == (backend.url, [1000, 1001, 1002])
    assert dropped == {small.url: "HTTP 400: Unrecognized request argument supplied: return_token_ids",
                       backend.url: None}                       # per server: the student keeps its tokens
    assert len(small.requests) == 2 and len(backend.requests) == 1


def test_a_context_overflow_is_anthropics_prompt_too_long(tmp_path: Path) -> None:
    from tests.vllm_server import VLLMConfig, VLLMServer

    with VLLMServer(thinking_student, VLLMConfig(max_model_len=20)) as server, \
            AnthropicProxy(config(server.url)) as proxy:
        with pytest.raises(anthropic.BadRequestError) as caught:
            ask(proxy.route("k1", tmp_path / "proxy.jsonl"))
        writer = proxy.unroute("k1")
    error = caught.value.body["error"]
    assert error["type"] == "invalid_request_error" and error["message"].startswith("prompt is too long: ")
    assert "maximum context length is 20 tokens" in error["message"]
    [record] = records(tmp_path / "proxy.jsonl")
    assert (record["status"], record["error_kind"]) == (400, "context_overflow")
    assert writer is not None and writer.last_error_kind == "context_overflow"


def test_an_official_api_student_behind_the_proxy(tmp_path: Path) -> None:
    with LLMServer(lambda request: Reply(chat_completion("Done.", model="gpt-test"))) as server, \
            AnthropicProxy(config(server.url, provider="openai", default_backend="gpt-test",
                                  api_key="sk-t")) as proxy:
        message = ask(proxy.route("k1", tmp_path / "proxy.jsonl")).parse()
    assert message.content[0].text == "Done."
    [record] = records(tmp_path / "proxy.jsonl")
    assert record["completion_token_ids"] is None and record["backend_model"] == "gpt-test"
    assert "return_token_ids" not in server.requests[0] and server.requests[0]["model"] == "gpt-test"
