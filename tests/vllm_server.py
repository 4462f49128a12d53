"""A student server that answers like vLLM's OpenAI server, 0.10.2 or 0.33.0, on 127.0.0.1.

Written from the two wheels' own source (`pip download vllm==0.10.2 --no-deps`, `vllm==0.33.0`):
`entrypoints/openai/serving_chat.py` / `chat_completion/serving.py` + `message_assembly.py` (the full,
non-streaming generator), `protocol.py` (what `model_dump()` puts on the wire: every field, nulls
included), `tool_parsers/hermes_tool_parser.py`, `qwen3coder_tool_parser.py` / `parser/qwen3.py`,
`reasoning/qwen3_reasoning_parser.py`, `chat_utils.py` (which request keys reach the chat template),
`serving_engine.py` / `renderers/params.py` (context-length errors) and the validation handlers.

What differs by version, as the source has it:
| | 0.10.2 | 0.33.0 |
|---|---|---|
| reasoning in the response | `message.reasoning_content` | `message.reasoning` |
| request reasoning | dropped before the template | `reasoning` (`reasoning_content` renamed) reaches it |
| tool-call ids | `chatcmpl-tool-<32 hex>` | `chatcmpl-tool-<16 hex>` |
| empty `tool_calls` | `[]` | key absent |
| no `--enable-auto-tool-choice`, `tool_choice: auto` | 400 | the tool-call markup comes back as `content` |
| a cut tool call (`length`) | `finish_reason: tool_calls` if the parser still found calls | stays `length` |
| prompt > `--max-model-len` | 400 "... your request has N input tokens" | 400 "... your prompt contains N" |
| prompt + max_tokens too long | 400 "'max_tokens' ... is too large" | max_tokens clamped (ends in `length`) |

The model is a script: `policy(request) -> text`, the raw text it generates (reasoning, content and
tool-call markup in the served format); tokenizer, chat template and parsers are tests/vllm_formats.py.
The template renders an assistant message exactly as the model writes it, so a client that echoes
each reply back faithfully (reasoning included, the way its server expects) sees every prompt start
with the previous prompt + completion; one that drops something does not.
"""
from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from tests.llm_server import LLMServer, Reply
from tests.vllm_formats import (  # noqa: F401  (re-exported: the tests import them from here)
    EOS,
    QWEN_EOS,
    Policy,
    ToolFormat,
    Version,
    assistant_text,
    decode,
    encode,
    extract_tool_calls,
    model_turn,
    qwen_tokenizer,
    render,
    render_model,
    split_reasoning,
    token_text,
)

# --- the server -------------------------------------------------------------------------------------------

@dataclass
class VLLMConfig:
    version: Version = "0.33"
    model: str = "student"
    tool_parser: ToolFormat | None = "hermes"    # None: started without --enable-auto-tool-choice
    reasoning_parser: bool = True                # --reasoning-parser qwen3
    max_model_len: int = 32768
    token_ids: bool = True                       # serves return_token_ids (>= 0.10.2)
    # Whitespace-only content beside tool calls: 0.10.2 keeps it (serving_chat.py passes the tool
    # parser's `content if content else None` through: "\n\n" after the qwen3 reasoning parser); 0.33.0
    # drops it (parser/abstract_parser.py `_extract_tool_calls`: `if content and content.strip() == "":
    # content = None`). None: as the version's source does; True: a server that keeps it whatever the
    # version (a parser run alone, as in the releases between).
    keeps_blank_content: bool | None = None
    # "chatml": the emulated template and tokenizer above; "model": the model's own chat template and
    # Qwen's BPE (tests/vllm_formats.py `ModelFormat`), what the token-prefix tests need.
    template: Literal["chatml", "model"] = "chatml"


class _ToyTokenizer:
    eos = EOS

    @staticmethod
    def encode(text: str) -> list[int]:
        return encode(text)

    @staticmethod
    def token_text(token_id: int) -> str:
        return token_text(token_id)

    @staticmethod
    def decode(ids: list[int], skip_special: bool = True) -> str:
        return decode(ids) if skip_special else "".join(token_text(i) for i in ids)


def tokenizer_of(config: VLLMConfig) -> Any:
    return qwen_tokenizer() if config.template == "model" else _ToyTokenizer()


def prompt_of(config: VLLMConfig, request: dict[str, Any]) -> str:
    fmt = config.tool_parser or "hermes"
    if config.template == "model":
        return render_model(request.get("messages") or [], request.get("tools"), config.version, fmt)
    return render(request.get("messages") or [], request.get("tools"), config.version, fmt)


def error(message: str, kind: str = "BadRequestError", code: int = 400, param: str | None = None) -> Reply:
    """vLLM's ErrorResponse: `{"error": {message, type, param, code}}`, status = code."""
    return Reply({"error": {"message": message, "type": kind, "param": param, "code": code}}, status=code)


def _overflow(config: VLLMConfig, prompt: int, max_tokens: int | None) -> Reply | int | None:
    """A context error, or the max_tokens the engine will use (0.33 clamps), or None (no limit asked)."""
    limit = config.max_model_len
    if config.version == "0.10":        # serving_engine._validate_input; serving_chat adds " {e.__cause__}"
        if prompt >= limit:
            return error(f"This model's maximum context length is {limit} tokens. However, your request has "
                         f"{prompt} input tokens. Please reduce the length of the input messages. None")
        if max_tokens is not None and prompt + max_tokens > limit:
            return error(f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's "
                         f"maximum context length is {limit} tokens and your request has {prompt} input "
                         f"tokens ({max_tokens} > {limit} - {prompt}). None")
        return max_tokens if max_tokens is not None else limit - prompt
    if prompt > limit:                  # renderers/params.py _token_len_check
        return error(f"This model's maximum context length is {limit} tokens. However, your prompt contains "
                     f"{prompt} input tokens, which exceeds this limit even without any output tokens. "
                     "Please reduce the length of the input prompt.", param="input_tokens")
    budget = min(limit - prompt, max_tokens if max_tokens is not None else limit)   # get_max_tokens
    if budget < 1:
        return error(f"max_tokens must be at least 1, got {budget}.", param="max_tokens")
    return budget


def _logprobs(ids: list[int], tokenizer: Any) -> dict[str, Any]:
    return {"content": [{"token": tokenizer.token_text(i), "logprob": -round(0.01 * (1 + i % 7), 4),
                         "bytes": list(tokenizer.token_text(i).encode()), "top_logprobs": []} for i in ids]}


def _hex(version: Version) -> str:
    return secrets.token_hex(16 if version == "0.10" else 8)   # utils.random_uuid: uuid4 hex / 64 bits


def complete(config: VLLMConfig, policy: Policy, request: dict[str, Any]) -> Reply:
    """One non-streaming /v1/chat/completions, as vLLM answers it."""
    if request.get("model") not in (None, config.model):
        return error(f"The model `{request.get('model')}` does not exist.", "NotFoundError", 404, "model")
    tools = request.get("tools")
    choice = request.get("tool_choice", "auto" if tools else "none")
    if choice == "auto" and tools and config.tool_parser is None and config.version == "0.10":
        return error('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
    fmt = config.tool_parser or "hermes"
    tokenizer = tokenizer_of(config)
    prompt_ids = tokenizer.encode(prompt_of(config, request))
    asked = request.get("max_completion_tokens") or request.get("max_tokens")
    budget = _overflow(config, len(prompt_ids), asked)
    if isinstance(budget, Reply):
        return budget
    written = policy(request)               # the text the model writes, or the very ids it sampled
    generated = (written if isinstance(written, list) else tokenizer.encode(written)) + [tokenizer.eos]
    ids, engine_finish = (generated, "stop") if len(generated) <= budget else (generated[:budget], "length")
    text = tokenizer.decode(ids)
    reasoning, content = split_reasoning(text) if config.reasoning_parser else (None, text)
    calls: list[dict[str, str]] = []
    if config.tool_parser and choice == "auto" and tools:
        calls, content = extract_tool_calls(content or "", config.tool_parser)
        if not calls:
            content = content or None
    if calls and isinstance(content, str) and not content.strip():
        keeps_blank = config.keeps_blank_content if config.keeps_blank_content is not None \
            else config.version == "0.10"
        content = content if keeps_blank else None
    elif calls and content is not None and fmt == "qwen3_coder" and config.version == "0.33":
        content = content.strip()            # the qwen3 engine strips what is left
    tool_calls = [{"id": f"chatcmpl-tool-{_hex(config.version)}", "type": "function", "function": call}
                  for call in calls]
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None, "annotations": None,
                               "audio": None, "function_call": None, "tool_calls": tool_calls}
    if config.version == "0.10":
        message["reasoning_content"] = reasoning
        finish = "tool_calls" if calls else engine_finish
    else:
        if not tool_calls:
            del message["tool_calls"]           # ChatMessage._serialize pops an empty list
        message["reasoning"] = reasoning
        # resolve_finish_reason: a cut call stays `length`
        finish = "tool_calls" if calls and engine_finish == "stop" else engine_finish
    wants_ids = bool(request.get("return_token_ids")) and config.token_ids
    out: dict[str, Any] = {"index": 0, "message": message,
                           "logprobs": _logprobs(ids, tokenizer) if request.get("logprobs") else None,
                           "finish_reason": finish, "stop_reason": None,
                           "token_ids": ids if wants_ids else None}
    if config.version == "0.33":
        out.update(routed_experts=None, weight_versions=None)
    usage: dict[str, Any] = {"prompt_tokens": len(prompt_ids), "total_tokens": len(prompt_ids) + len(ids),
                             "completion_tokens": len(ids), "prompt_tokens_details": None}
    body: dict[str, Any] = {"id": f"chatcmpl-{_hex(config.version)}", "object": "chat.completion",
                            "created": int(time.time()), "model": config.model, "choices": [out],
                            "service_tier": None, "system_fingerprint": None, "usage": usage,
                            "prompt_logprobs": None, "prompt_token_ids": prompt_ids if wants_ids else None,
                            "kv_transfer_params": None}
    if config.version == "0.33":
        usage["completion_tokens_details"] = (
            {"reasoning_tokens": len(tokenizer.encode(reasoning or ""))} if config.reasoning_parser else None)
        body.update(prompt_text=None, ec_transfer_params=None, metrics=None)
    return Reply(body)


def detokenize(config: VLLMConfig, request: dict[str, Any]) -> Reply:
    """POST /detokenize (at the server's root, beside /v1): `tokenizer.decode(tokens)`, special tokens kept
    (serving_tokenization.py / serve/tokenize/serving.py)."""
    tokens = request.get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        return error("tokens: Input should be a valid list of integers", param="tokens")
    if request.get("model") not in (None, config.model):
        return error(f"The model `{request.get('model')}` does not exist.", "NotFoundError", 404, "model")
    return Reply({"prompt": tokenizer_of(config).decode(tokens, skip_special=False)})


def models(config: VLLMConfig) -> dict[str, Any]:
    """GET /v1/models: a ModelList whose card carries max_model_len."""
    card = {"id": config.model, "object": "model", "created": int(time.time()), "owned_by": "vllm",
            "root": f"/models/{config.model}", "parent": None, "max_model_len": config.max_model_len,
            "permission": []}
    return {"object": "list", "data": [card]}


def validation_error_010(request: dict[str, Any], what: str) -> Reply:
    """0.10.2's RequestValidationError handler: `str(exc)` + `str(exc.errors())`, the input echoed whole."""
    detail = {"type": "value_error", "loc": ("body",), "msg": f"Value error, {what}", "input": request}
    return error(f"1 validation error:\n  {detail}\n {[detail]}", "Bad Request")


class VLLMServer(LLMServer):
    """`with VLLMServer(policy, VLLMConfig(version="0.10")) as server:`; `server.url` ends in /v1.

    `intercept(request)` may answer a request first (a hung server, a failing one); None lets vLLM answer.
    """

    def __init__(self, policy: Policy, config: VLLMConfig | None = None,
                 intercept: Callable[[dict[str, Any]], Reply | None] | None = None) -> None:
        self.config = config or VLLMConfig()
        self.policy = policy
        self.intercept = intercept
        self.detokenized: list[dict[str, Any]] = []      # POST /detokenize bodies (not in `requests`)
        super().__init__(self._respond)

    def _respond(self, request: dict[str, Any]) -> Reply:
        early = self.intercept(request) if self.intercept else None
        return early if early is not None else complete(self.config, self.policy, request)

    def _handler(self) -> Any:
        base = super()._handler()
        server = self

        class Handler(base):  # type: ignore[misc, valid-type]
            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(Reply(models(server.config)))
                else:
                    self._send(error("Not Found", "NotFoundError", 404))

            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/detokenize":    # vLLM serves it at the root, not under /v1
                    super().do_POST()
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.detokenized.append(body)
                early = server.intercept(body) if server.intercept else None
                self._send(early if early is not None else detokenize(server.config, body))

        return Handler
