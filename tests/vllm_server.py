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

import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tests.llm_server import LLMServer, Reply
from tests.vllm_checks import (
    before_validators,
    body_errors,
    error,
    invalid,
    not_json,
    sampling_errors,
    sanitize,
    summary,
    validation_errors,
)
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
    # VLLM_ALLOW_RUNTIME_LORA_UPDATING=True: POST /v1/load_lora_adapter and /v1/unload_lora_adapter answer
    # (without it vLLM does not register them: 404); an adapter loaded is a model name requests may ask.
    lora_updates: bool = False

LORA_ROUTES = ("/v1/load_lora_adapter", "/v1/unload_lora_adapter")
NOT_FOUND = Reply({"detail": "Not Found"}, status=404)       # FastAPI's answer on a route it does not have


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
        # The tokenizer stops at limit + 1 tokens (get_encode_kwargs), so that is the count it reports.
        return invalid(f"This model's maximum context length is {limit} tokens. However, your prompt "
                       f"contains at least {limit + 1} input tokens, which exceeds this limit even without "
                       "any output tokens. Please reduce the length of the input prompt.", "input_tokens",
                       limit + 1)
    # get_max_tokens; SamplingParams refuses a budget under 1 (vllm_checks.sampling_errors)
    return min(limit - prompt, max_tokens if max_tokens is not None else limit)


def _logprobs(ids: list[int], tokenizer: Any, top: int) -> dict[str, Any]:
    """One entry per token; `top_logprobs` holds the `top` likeliest (the sampled token first here)."""
    def entry(i: int, rank: int = 0) -> dict[str, Any]:
        text = tokenizer.token_text(i)
        return {"token": text, "logprob": -round(0.01 * (1 + i % 7) + rank, 4), "bytes": list(text.encode())}
    return {"content": [{**entry(i), "top_logprobs": [entry(i if rank == 0 else tokenizer.eos, rank)
                                                      for rank in range(top)]} for i in ids]}


def _hex(version: Version) -> str:
    return secrets.token_hex(16 if version == "0.10" else 8)   # utils.random_uuid: uuid4 hex / 64 bits


def fingerprint(config: VLLMConfig) -> str | None:
    """`system_fingerprint`: 0.33's default (`--fingerprint-mode full`) vllm-VERSION-HASH8; 0.10.2: none."""
    if config.version == "0.10":
        return None
    return f"vllm-0.33.0-{hashlib.sha256(repr(config).encode()).hexdigest()[:8]}"


def refused(config: VLLMConfig, request: dict[str, Any], adapters: dict[str, str]) -> Reply | None:
    """What 0.33 refuses before the prompt is rendered (0.10.2: only an unknown model)."""
    if config.version == "0.33":
        found = body_errors(request)
        if found:
            return validation_errors(found)
        early = before_validators(request)
        if early is not None:
            return early
    if request.get("model") not in (None, config.model, *adapters):
        aliases = f" Valid aliases: {config.model}." if config.version == "0.33" else ""
        return error(f"The model `{request.get('model')}` does not exist.{aliases}", "NotFoundError", 404,
                     "model")
    if config.version == "0.33" and not request.get("messages"):
        return error("Cannot apply chat template to an empty conversation. Provide at least one message.")
    return None


def complete(config: VLLMConfig, policy: Policy, request: dict[str, Any],
             adapters: dict[str, str] | None = None, checked: bool = True) -> Reply:
    """One non-streaming /v1/chat/completions, as vLLM answers it (`adapters`: the LoRA names loaded;
    `checked`: False takes the request as it is, as a text completion is answered here)."""
    early = refused(config, request, adapters or {}) if checked else None
    if early is not None:
        return early
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
    checked = sampling_errors(request, budget) if config.version == "0.33" else None
    if checked is not None:
        return checked
    written = policy(request)               # the text the model writes, or the very ids it sampled
    generated = (written if isinstance(written, list) else tokenizer.encode(written)) + [tokenizer.eos]
    ids, engine_finish = (generated, "stop") if len(generated) <= budget else (generated[:budget], "length")
    text = tokenizer.decode(ids)
    reasoning, content = split_reasoning(text) if config.reasoning_parser else (None, text)
    calls: list[dict[str, str]] = []
    # 0.33 reads "required" and a named tool from the model's own markup, as "auto" (hermes and qwen3 have
    # a structural tag: abstract_tool_parser sets supports_required_and_named False), content at least "".
    forced = config.version == "0.33" and (choice == "required" or isinstance(choice, dict))
    if config.tool_parser and (choice == "auto" or forced) and tools:
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
        if forced:
            message["content"] = content or ""  # message_assembly.assemble_chat_message_fields
        message["reasoning"] = reasoning
        # resolve_finish_reason: a cut call stays `length`; a named tool's call ends in `stop`
        named = isinstance(choice, dict)
        finish = "tool_calls" if calls and engine_finish == "stop" and not named else engine_finish
    wants_ids = bool(request.get("return_token_ids")) and config.token_ids
    out: dict[str, Any] = {"index": 0, "message": message,
                           "logprobs": _logprobs(ids, tokenizer, request.get("top_logprobs") or 0)
                           if request.get("logprobs") else None,
                           "finish_reason": finish, "stop_reason": None,
                           "token_ids": ids if wants_ids else None}
    if config.version == "0.33":
        out.update(routed_experts=None, weight_versions=None)
    usage: dict[str, Any] = {"prompt_tokens": len(prompt_ids), "total_tokens": len(prompt_ids) + len(ids),
                             "completion_tokens": len(ids), "prompt_tokens_details": None}
    body: dict[str, Any] = {"id": f"chatcmpl-{_hex(config.version)}", "object": "chat.completion",
                            "created": int(time.time()), "model": request.get("model") or config.model,
                            "choices": [out], "service_tier": None, "system_fingerprint": fingerprint(config),
                            "usage": usage,
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
    if config.version == "0.33" and not isinstance(tokens, list):
        return validation_errors([{"type": "list_type", "loc": "body.tokens",
                                   "msg": "Input should be a valid list", "input": summary(tokens)}])
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        return error("tokens: Input should be a valid list of integers", param="tokens")
    if request.get("model") not in (None, config.model):
        return error(f"The model `{request.get('model')}` does not exist.", "NotFoundError", 404, "model")
    return Reply({"prompt": tokenizer_of(config).decode(tokens, skip_special=False)})


def models(config: VLLMConfig, adapters: dict[str, str] | None = None) -> dict[str, Any]:
    """GET /v1/models: a ModelList, the base model's card with max_model_len, then a card per LoRA adapter
    loaded (parent: the base model); each card carries one ModelPermission."""
    def card(name: str, root: str, parent: str | None, max_model_len: int | None) -> dict[str, Any]:
        now = int(time.time())
        permission = {"id": f"modelperm-{secrets.token_hex(8)}", "object": "model_permission", "created": now,
                      "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                      "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                      "organization": "*", "group": None, "is_blocking": False}
        return {"id": name, "object": "model", "created": now, "owned_by": "vllm", "root": root,
                "parent": parent, "max_model_len": max_model_len, "permission": [permission]}
    cards = [card(config.model, f"/models/{config.model}", None, config.max_model_len)]
    cards += [card(name, path, config.model, None) for name, path in (adapters or {}).items()]
    return {"object": "list", "data": cards}


def lora(config: VLLMConfig, adapters: dict[str, str], route: str, request: dict[str, Any]) -> Reply | str:
    """POST /v1/load_lora_adapter and /v1/unload_lora_adapter (serve/lora/api_router.py, models/serving.py):
    a plain-text "Success: ..." or an error; `adapters` (name -> path) is updated in place."""
    need = ("lora_name", "lora_path") if route == "load" else ("lora_name",)
    missing = [{"type": "missing", "loc": f"body.{key}", "msg": "Field required", "input": summary(request)}
               for key in need if key not in request]
    if missing:
        return validation_errors(missing)
    name, path = request["lora_name"], request.get("lora_path")
    if route == "unload":
        if not name:
            return error("'lora_name' needs to be provided to unload a LoRA adapter.", "InvalidUserInput")
        if name not in adapters:
            return error(f"The lora adapter '{name}' cannot be found.", "NotFoundError", 404)
        del adapters[name]
        return f"Success: LoRA adapter '{name}' removed successfully."
    if not name or not path:
        return error("Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput")
    if name == config.model:
        return error(f"The lora adapter '{name}' conflicts with a served base model.", "InvalidUserInput")
    if name in adapters and not request.get("load_inplace"):
        return error(f"The lora adapter '{name}' has already been loaded. If you want to load the adapter in "
                     "place, set 'load_inplace' to True.", "InvalidUserInput")
    if not (Path(path) / "adapter_config.json").is_file():
        return error(sanitize(f"Loading lora {name} failed: No adapter found for {path}"), "NotFoundError",
                     404)
    adapters[name] = path
    return f"Success: LoRA adapter '{name}' added successfully."


def validation_error_010(request: dict[str, Any], what: str) -> Reply:
    """0.10.2's RequestValidationError handler: `str(exc)` + `str(exc.errors())`, the input echoed whole."""
    detail = {"type": "value_error", "loc": ("body",), "msg": f"Value error, {what}", "input": request}
    return error(f"1 validation error:\n  {detail}\n {[detail]}", "Bad Request")


class VLLMServer(LLMServer):
    """`with VLLMServer(policy, VLLMConfig(version="0.10")) as server:`; `server.url` ends in /v1.

    `intercept(request)` may answer a request first (a hung server, a failing one); None lets vLLM answer.
    Routes: POST /v1/chat/completions (and /v1/completions, answered as chat, unchecked), /detokenize, the
    LoRA routes with `config.lora_updates`; GET /v1/models; anything else 404 `{"detail": "Not Found"}`, as
    FastAPI answers.
    """

    def __init__(self, policy: Policy, config: VLLMConfig | None = None,
                 intercept: Callable[[dict[str, Any]], Reply | None] | None = None) -> None:
        self.config = config or VLLMConfig()
        self.policy = policy
        self.intercept = intercept
        self.detokenized: list[dict[str, Any]] = []      # POST /detokenize bodies (not in `requests`)
        self.adapters: dict[str, str] = {}                 # LoRA adapters loaded at run time: name -> path
        super().__init__(self._respond)

    def _respond(self, request: dict[str, Any], chat: bool = True) -> Reply:
        early = self.intercept(request) if self.intercept else None
        return early if early is not None else complete(self.config, self.policy, request, self.adapters,
                                                        checked=chat)

    def _handler(self) -> Any:
        base = super()._handler()
        server = self

        class Handler(base):  # type: ignore[misc, valid-type]
            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(Reply(models(server.config, server.adapters)))
                else:
                    self._send(NOT_FOUND)

            def do_POST(self) -> None:
                path = self.path.rstrip("/")
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError as bad:
                    self._send(not_json(bad))
                    return
                if path.endswith("/completions"):
                    server._record(body, dict(self.headers))
                    # A text completion (`prompt`, no messages) is answered as chat, its request unchecked.
                    self._send(server._respond(body, chat=path.endswith("/chat/completions")))
                elif path == "/detokenize":                 # vLLM serves it at the root, not under /v1
                    server.detokenized.append(body)
                    early = server.intercept(body) if server.intercept else None
                    self._send(early if early is not None else detokenize(server.config, body))
                elif path in LORA_ROUTES and server.config.lora_updates:
                    route = path.removeprefix("/v1/").removesuffix("_lora_adapter")
                    answer = lora(server.config, server.adapters, route, body)
                    if isinstance(answer, Reply):
                        self._send(answer)
                    else:
                        self._send_text(answer)
                else:
                    self._send(NOT_FOUND)

            def _send_text(self, text: str) -> None:
                """A 200 in plain text, as the LoRA routes' `Response(content=...)` answers."""
                payload = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler
