"""The stand-in (tests/vllm_server.py) held against a real vLLM server on the same requests (#56).

    python bench/vllm_standin_diff.py --url http://127.0.0.1:PORT --adapter LORA_DIR [--out /tmp/vllm_diff.md]

The real server serves a model under the name `student`, with the hermes parser, LoRA and runtime adapter
updates, e.g. vLLM's CPU build on the SmolLM2 folder examples/make_smollm2.py writes (docs/loop.md,
"vLLM on CPU"):

    VLLM_CPU_KVCACHE_SPACE=2 VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve models/smollm2 \
        --served-model-name student --enable-auto-tool-choice --tool-call-parser hermes \
        --enable-lora --max-lora-rank 16 --dtype bfloat16 --max-model-len 8192

Every request goes to the real server first, then to the stand-in (VLLMConfig version 0.33, the model's
template, no reasoning parser, the same max_model_len) whose policy writes what the real model wrote (its
`token_ids` through /detokenize; a reply cut by max_tokens is cut at the same text). What depends on the
model or its tokenizer (ids, token counts, logprob values, timestamps, random ids) is compared by type;
everything else (status, keys, finish_reason, content, tool calls, error type/param/message) by value, an
error message's numbers aside (token counts by another tokenizer).
Prints every difference and writes them as Markdown to --out.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.vllm_server import VLLMConfig, VLLMServer, qwen_tokenizer  # noqa: E402

BASH = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command and return its output.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
ASK_TOOL = [{"role": "system", "content": "You are a coding agent. Use the bash tool to act."},
            {"role": "user", "content": "List the files in the current folder."}]
HELLO = [{"role": "user", "content": "Say hello in five words."}]
CALLED = [*ASK_TOOL, {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "calc.py\nREADME.md"}]
CHAT = "/v1/chat/completions"
# SmolLM2 left to itself writes no whole call; asked to repeat one (as it did the turn before), it does.
WHOLE = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
ECHO = [{"role": "system", "content": "You repeat the user's text exactly, nothing else."},
        {"role": "user", "content": WHOLE}, {"role": "assistant", "content": WHOLE},
        {"role": "user", "content": WHOLE}]
NAMED = {"type": "function", "function": {"name": "bash"}}


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "student", "temperature": 0, "max_tokens": 24, **fields}


def cases(adapter: str) -> list[tuple[str, str, str, Any]]:
    """(name, method, path, body): the same list goes to both servers, in order."""
    long = "word " * 9000
    ok: list[tuple[str, str, str, Any]] = [
        ("plain", "POST", CHAT, chat(messages=HELLO)),
        ("ids+logprobs", "POST", CHAT, chat(messages=HELLO, return_token_ids=True, logprobs=True,
                                            top_logprobs=2)),
        ("tools auto", "POST", CHAT, chat(messages=ASK_TOOL, tools=[BASH], max_tokens=48,
                                          return_token_ids=True)),
        ("tools required", "POST", CHAT, chat(messages=ASK_TOOL, tools=[BASH], tool_choice="required",
                                              max_tokens=48)),
        ("tools named", "POST", CHAT, chat(messages=ASK_TOOL, tools=[BASH], max_tokens=48,
                                           tool_choice=NAMED)),
        ("tools auto, a whole call", "POST", CHAT, chat(messages=ECHO, tools=[BASH], max_tokens=40)),
        ("tools required, a whole call", "POST", CHAT, chat(messages=ECHO, tools=[BASH], max_tokens=40,
                                                            tool_choice="required")),
        ("tools named, a whole call", "POST", CHAT, chat(messages=ECHO, tools=[BASH], max_tokens=40,
                                                         tool_choice=NAMED)),
        ("tools none", "POST", CHAT, chat(messages=ASK_TOOL, tools=[BASH], tool_choice="none")),
        ("after a tool result", "POST", CHAT, chat(messages=CALLED, tools=[BASH], return_token_ids=True)),
        ("unknown field", "POST", CHAT, chat(messages=HELLO, frobnicate=1)),
        ("max_completion_tokens", "POST", CHAT, {**chat(messages=HELLO), "max_tokens": None,
                                                 "max_completion_tokens": 8}),
        # 8,170 of the 8,192 tokens in the prompt: vLLM >= 0.11 clamps max_tokens to the 22 left
        ("prompt + max_tokens over the context", "POST", CHAT, chat(
            messages=[{"role": "user", "content": "word " * 8160}], max_tokens=100)),
        ("models", "GET", "/v1/models", None),
        ("detokenize", "POST", "/detokenize", {"model": "student", "tokens": [1, 2, 3]}),
    ]
    bad: list[tuple[str, str, str, Any]] = [
        ("context overflow", "POST", CHAT, chat(messages=[{"role": "user", "content": long}])),
        ("unknown model", "POST", CHAT, {**chat(messages=HELLO), "model": "nobody"}),
        ("max_tokens -1", "POST", CHAT, chat(messages=HELLO, max_tokens=-1)),
        ("max_tokens 0", "POST", CHAT, chat(messages=HELLO, max_tokens=0)),
        ("max_tokens string", "POST", CHAT, chat(messages=HELLO, max_tokens="many")),
        ("temperature -1", "POST", CHAT, chat(messages=HELLO, temperature=-1)),
        ("temperature string", "POST", CHAT, chat(messages=HELLO, temperature="hot")),
        ("top_p 2", "POST", CHAT, chat(messages=HELLO, top_p=2)),
        ("n 0", "POST", CHAT, chat(messages=HELLO, n=0)),
        ("messages a string", "POST", CHAT, chat(messages="hello")),
        ("messages missing", "POST", CHAT, {"model": "student", "max_tokens": 8}),
        ("messages empty", "POST", CHAT, chat(messages=[])),
        ("role unknown", "POST", CHAT, chat(messages=[{"role": "robot", "content": "hi"}])),
        ("message without role", "POST", CHAT, chat(messages=[{"content": "hi"}])),
        ("tool_choice without tools", "POST", CHAT, chat(messages=HELLO, tool_choice="auto")),
        ("tool_choice unknown tool", "POST", CHAT, chat(messages=ASK_TOOL, tools=[BASH], tool_choice={
            "type": "function", "function": {"name": "python"}})),
        ("tools empty", "POST", CHAT, chat(messages=ASK_TOOL, tools=[])),
        ("top_logprobs without logprobs", "POST", CHAT, chat(messages=HELLO, top_logprobs=2)),
        ("top_logprobs 50", "POST", CHAT, chat(messages=HELLO, logprobs=True, top_logprobs=50)),
        ("stream_options without stream", "POST", CHAT, chat(messages=HELLO,
                                                              stream_options={"include_usage": True})),
        ("body not JSON", "POST", CHAT, b"{not json"),
        ("unknown route", "POST", "/v1/nowhere", chat(messages=HELLO)),
        ("detokenize bad tokens", "POST", "/detokenize", {"model": "student", "tokens": "abc"}),
    ]
    lora: list[tuple[str, str, str, Any]] = [
        ("lora load", "POST", "/v1/load_lora_adapter", {"lora_name": "round-1", "lora_path": adapter}),
        ("lora load again", "POST", "/v1/load_lora_adapter", {"lora_name": "round-1", "lora_path": adapter}),
        ("lora load in place", "POST", "/v1/load_lora_adapter", {"lora_name": "round-1", "lora_path": adapter,
                                                                  "load_inplace": True}),
        ("lora load without a path", "POST", "/v1/load_lora_adapter", {"lora_name": "round-2"}),
        ("lora load a base model's name", "POST", "/v1/load_lora_adapter", {"lora_name": "student",
                                                                             "lora_path": adapter}),
        ("lora load a missing folder", "POST", "/v1/load_lora_adapter", {"lora_name": "round-3",
                                                                          "lora_path": "/nonexistent/lora"}),
        ("models with an adapter", "GET", "/v1/models", None),
        ("asking the adapter", "POST", CHAT, {**chat(messages=HELLO), "model": "round-1"}),
        ("lora unload", "POST", "/v1/unload_lora_adapter", {"lora_name": "round-1"}),
        ("lora unload again", "POST", "/v1/unload_lora_adapter", {"lora_name": "round-1"}),
        ("asking the unloaded adapter", "POST", CHAT, {**chat(messages=HELLO), "model": "round-1"}),
    ]
    return ok + bad + lora


# --- what each server answered, and how to compare it -------------------------------------------------------

def send(client: httpx.Client, root: str, method: str, path: str, body: Any) -> tuple[int, Any]:
    """(status, JSON body or text); status 0 when the server closed the connection without an answer."""
    raw = {"content": body, "headers": {"Content-Type": "application/json"}} if isinstance(body, bytes) \
        else {"json": body}
    try:
        answer = client.request(method, root + path, **raw)
    except httpx.RemoteProtocolError as error:
        return 0, f"no answer: {error}"
    try:
        return answer.status_code, answer.json()
    except ValueError:
        return answer.status_code, answer.text


# system_fingerprint: vllm-VERSION-HASH8 of the server's configuration on both (compared by type).
VOLATILE = re.compile(r"(^|\.)(id|created|token_ids|prompt_token_ids|logprob|bytes|prompt_tokens|"
                      r"completion_tokens|total_tokens|reasoning_tokens|max_model_len|root|token|"
                      r"system_fingerprint)$|"
                      r"top_logprobs\.\d+|^data\.\d+\.(created|root)$")


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """{dotted path: leaf}; lists of numbers (ids) are one leaf, other lists are indexed."""
    if isinstance(value, dict):
        if not value:
            return {path: {}}
        return {k: v for key, item in value.items() for k, v in flatten(item, f"{path}.{key}" if path
                                                                          else str(key)).items()}
    if isinstance(value, list) and value and not all(isinstance(i, int) for i in value):
        return {k: v for index, item in enumerate(value) for k, v in flatten(item, f"{path}.{index}").items()}
    return {path: value}


def _kind(value: Any) -> str:
    return "list[int]" if isinstance(value, list) else type(value).__name__


def _short(body: Any) -> str:
    if isinstance(body, dict) and "error" in body:
        return json.dumps(body["error"])[:600]
    if isinstance(body, dict) and "choices" in body:
        return f"a chat.completion ({body['choices'][0].get('finish_reason')})"
    return (body if isinstance(body, str) else json.dumps(body))[:300]


def differences(real: tuple[int, Any], stand_in: tuple[int, Any]) -> list[str]:
    if real[0] != stand_in[0]:          # one answered, the other refused: the two bodies say how
        return [f"status: real {real[0]}, stand-in {stand_in[0]}", f"real: {_short(real[1])}",
                f"stand-in: {_short(stand_in[1])}"]
    out = []
    if not isinstance(real[1], dict) or not isinstance(stand_in[1], dict):
        if real[1] != stand_in[1]:
            out.append(f"body: real {real[1]!r:.300}, stand-in {stand_in[1]!r:.300}")
        return out
    left, right = flatten(real[1]), flatten(stand_in[1])
    # A logprobs list is as long as the reply: its entries past the first are the first's shape again.
    keys = {re.sub(r"content\.\d+\.", "content.0.", k) for k in (*left, *right)}
    left = {re.sub(r"content\.\d+\.", "content.0.", k): v for k, v in left.items()}
    right = {re.sub(r"content\.\d+\.", "content.0.", k): v for k, v in right.items()}
    for key in sorted(keys):
        if key not in right:
            out.append(f"`{key}` only in real: {left[key]!r:.200}")
        elif key not in left:
            out.append(f"`{key}` only in the stand-in: {right[key]!r:.200}")
        elif VOLATILE.search(key) or key.endswith("top_logprobs"):
            if _kind(left[key]) != _kind(right[key]):
                out.append(f"`{key}` type: real {_kind(left[key])}, stand-in {_kind(right[key])}")
        elif key.endswith("message") and isinstance(left[key], str) and isinstance(right[key], str) \
                and re.sub(r"\d+", "N", left[key]) == re.sub(r"\d+", "N", right[key]):
            continue            # the same error, token counts by another tokenizer
        elif left[key] != right[key]:
            out.append(f"`{key}`: real {left[key]!r:.600}, stand-in {right[key]!r:.600}")
    return out


# --- the stand-in's policy: what the real model wrote -------------------------------------------------------

class Replay:
    """The stand-in's policy: the real model's text, as ids of the stand-in's tokenizer."""

    def __init__(self) -> None:
        self.ids: list[int] = []

    def __call__(self, request: dict[str, Any]) -> list[int]:
        return self.ids


def written(client: httpx.Client, root: str, body: dict[str, Any], answer: Any) -> tuple[str, bool] | None:
    """The raw text the real model generated (special tokens kept, EOS dropped) and whether it was cut."""
    if not isinstance(answer, dict) or "choices" not in answer:
        return None
    choice = answer["choices"][0]
    ids = choice.get("token_ids")
    if ids is None:             # asked again (greedy) for the ids
        _, again = send(client, root, "POST", CHAT, {**body, "return_token_ids": True})
        ids = again["choices"][0]["token_ids"]
    _, text = send(client, root, "POST", "/detokenize", {"model": body.get("model"), "tokens": ids})
    raw = text["prompt"]
    stopped = raw.endswith("<|im_end|>")
    return raw.removesuffix("<|im_end|>"), not stopped


def run(url: str, adapter: str, max_model_len: int, only: str = "") -> list[tuple[str, list[str]]]:
    policy = Replay()
    config = VLLMConfig(version="0.33", model="student", reasoning_parser=False, max_model_len=max_model_len,
                        template="model", lora_updates=True)
    tokenizer = qwen_tokenizer()
    report = []
    with VLLMServer(policy, config) as stand_in, httpx.Client(timeout=600) as client:
        fake = stand_in.url.removesuffix("/v1")
        real_root = url.rstrip("/").removesuffix("/v1")
        for name, method, path, body in cases(adapter):
            if not re.search(only, name):
                continue
            real = send(client, real_root, method, path, body)
            mirrored = body
            raw = written(client, real_root, body, real[1]) if real[0] == 200 and path == CHAT else None
            if raw is not None:
                text, cut = raw
                policy.ids = tokenizer.encode(text)
                if cut:             # cut where the real reply was: the model would have gone on
                    cap = "max_completion_tokens" if body.get("max_completion_tokens") else "max_tokens"
                    mirrored = {**body, cap: len(policy.ids)}
                    policy.ids = policy.ids + tokenizer.encode(" and on")
            fake_answer = send(client, fake, method, path, mirrored)
            found = differences(real, fake_answer)
            report.append((name, found, real, fake_answer))
            print(f"== {name}: {len(found)} difference(s)")
            for line in found:
                print("   ", line)
    return report


def markdown(report: list[Any]) -> str:
    lines = ["# vLLM stand-in vs real vLLM (bench/vllm_standin_diff.py)", ""]
    for name, found, real, fake in report:
        lines.append(f"## {name}: {len(found)} difference(s) (real {real[0]}, stand-in {fake[0]})")
        lines += [f"- {line}" for line in found]
        if real[0] != 200 or found:
            shown = real[1] if isinstance(real[1], str) else json.dumps(real[1])
            lines.append(f"\n  real body: `{shown[:700]}`")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the real server, http://HOST:PORT")
    parser.add_argument("--adapter", required=True, help="a LoRA adapter folder the real server can read")
    parser.add_argument("--max-model-len", type=int, default=8192, help="the real server's (8192)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/vllm_diff.md"))
    parser.add_argument("--only", default="", help="a regular expression: only the cases whose name it finds")
    args = parser.parse_args()
    report = run(args.url, args.adapter, args.max_model_len, args.only)
    args.out.write_text(markdown(report))
    total = sum(len(found) for _, found, *_ in report)
    print(f"{total} difference(s) over {len(report)} requests; written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
