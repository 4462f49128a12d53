"""A student's reply, read from a chat.completion body and written back into the history (pure).

Reading: the first choice's message as the server sent it (`content` stays null beside tool calls),
vLLM's token extension (`prompt_token_ids`, `choices[0].token_ids`, `logprobs.content[]`) and the
reasoning, which vLLM <= 0.11 names `reasoning_content` and 0.12+ `reasoning`.

Writing back: the next request must show the student its own reply the way its chat template expects,
or the prompt no longer extends the previous prompt + completion (and a reasoning model loses its
thoughts between tool calls). Where the server gave token ids, the reply goes back as the text the
model generated (`raw_history_message`): the parsed form loses what the tool parser drops (the text
between and after the calls, the calls' own spacing and key order), and the template cannot write back
what it never saw (#34: two parallel calls broke the prefix right after the first). Otherwise it goes
back parsed, as below. vLLM <= 0.11 drops any reasoning field of a request message before the
template runs, so the reasoning goes back inline, between the reasoning parser's tags, where Qwen3-style
templates look for it; 0.12+ hands `reasoning` to the template. `--reasoning-echo auto` picks by the
field the server answered with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

EchoStyle = Literal["auto", "field", "inline", "none"]
REASONING_FIELDS = ("reasoning", "reasoning_content")


@dataclass
class StudentReply:
    message: dict[str, Any]                    # role, content (None beside tool calls), tool_calls if any
    reasoning: str | None = None
    reasoning_field: str | None = None         # the key the server used: reasoning / reasoning_content
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    tokens: list[str] | None = None
    usage: dict[str, Any] | None = None
    elapsed_s: float = 0.0
    text: str | None = None                    # the completion as generated (raw_history_message)
    body: dict[str, Any] = field(default_factory=dict, repr=False)   # the raw response (the proxy's)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return self.message.get("tool_calls") or []


class BadReply(ValueError):
    pass


def _int_list(value: Any) -> list[int] | None:
    ok = isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
    return value if ok else None


def _tool_calls(raw: Any) -> list[dict[str, Any]]:
    calls = []
    for index, call in enumerate(raw if isinstance(raw, list) else []):
        function = (call or {}).get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):     # some servers send an object; the wire form is a string
            arguments = json.dumps(arguments if arguments is not None else {})
        calls.append({"id": call.get("id") or f"call_{index}", "type": "function",
                      "function": {"name": function.get("name") or "", "arguments": arguments}})
    return calls


def parse_completion(body: Any) -> StudentReply:
    """The first choice of a chat.completion body, with vLLM's token ids and logprobs where present.

    >>> reply = parse_completion({"choices": [{"message": {"role": "assistant", "content": "hi",
    ...     "reasoning": "r"}, "token_ids": [7],
    ...     "logprobs": {"content": [{"token": "hi", "logprob": -0.5}]}}], "prompt_token_ids": [1, 2]})
    >>> reply.message, reply.reasoning, reply.reasoning_field, reply.prompt_token_ids, reply.logprobs
    ({'role': 'assistant', 'content': 'hi'}, 'r', 'reasoning', [1, 2], [-0.5])
    """
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        raise BadReply(f"the response has no choice with a message: {str(body)[:200]}")
    choice, raw = choices[0], choices[0]["message"]
    content = raw.get("content")
    message: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else None}
    if calls := _tool_calls(raw.get("tool_calls")):
        message["tool_calls"] = calls
    entries = (choice.get("logprobs") or {}).get("content")
    entries = entries if isinstance(entries, list) and all(isinstance(e, dict) for e in entries) else None
    logprobs = [e.get("logprob") for e in entries] if entries else None
    if logprobs is not None and not all(isinstance(lp, int | float) for lp in logprobs):
        logprobs = None
    named = [key for key in REASONING_FIELDS if key in raw]
    reasoning = next((raw[key] for key in named if isinstance(raw[key], str)), None)
    return StudentReply(
        message=message, reasoning=reasoning, reasoning_field=named[0] if named else None,
        finish_reason=choice.get("finish_reason"),
        prompt_token_ids=_int_list(body.get("prompt_token_ids")),
        completion_token_ids=_int_list(choice.get("token_ids")),
        logprobs=logprobs, tokens=[str(e.get("token")) for e in entries] if logprobs and entries else None,
        usage=body.get("usage") if isinstance(body.get("usage"), dict) else None, body=body)


def extends(previous: StudentReply | None, reply: StudentReply) -> bool | None:
    """Whether `reply`'s prompt starts with the previous turn's prompt + completion (token ids), the
    property a trainer relies on to score a rollout as one sequence; None where ids are missing.

    >>> before = StudentReply({}, prompt_token_ids=[1, 2], completion_token_ids=[3])
    >>> extends(before, StudentReply({}, prompt_token_ids=[1, 2, 3, 4])), extends(before, StudentReply(
    ...     {}, prompt_token_ids=[1, 2, 5, 3]))
    (True, False)
    >>> extends(None, before) is None
    True
    """
    if previous is None or previous.prompt_token_ids is None or previous.completion_token_ids is None \
            or reply.prompt_token_ids is None:
        return None
    prefix = previous.prompt_token_ids + previous.completion_token_ids
    return reply.prompt_token_ids[:len(prefix)] == prefix


def break_at(previous: StudentReply, reply: StudentReply) -> tuple[int, int | None]:
    """Where `reply`'s prompt leaves the previous prompt + completion: (prompt index, index into the
    previous completion, or None where the earlier prompt itself was rendered otherwise).

    >>> before = StudentReply({}, prompt_token_ids=[1, 2], completion_token_ids=[3, 4])
    >>> break_at(before, StudentReply({}, prompt_token_ids=[1, 2, 3, 5])), break_at(
    ...     before, StudentReply({}, prompt_token_ids=[1, 7, 3, 4]))
    ((3, 1), (1, None))
    """
    prefix = (previous.prompt_token_ids or []) + (previous.completion_token_ids or [])
    prompt = reply.prompt_token_ids or []
    index = next((i for i, (a, b) in enumerate(zip(prefix, prompt, strict=False)) if a != b),
                 min(len(prefix), len(prompt)))
    start = len(previous.prompt_token_ids or [])
    return index, (index - start if index >= start else None)


def generated_ids(reply: StudentReply, max_tokens: int | None) -> list[int] | None:
    """The completion's ids without its end-of-turn token (the template writes that one itself); a
    reply cut at the limit has none.

    >>> generated_ids(StudentReply({}, finish_reason="stop", completion_token_ids=[5, 6, 2]), None)
    [5, 6]
    >>> generated_ids(StudentReply({}, finish_reason="length", completion_token_ids=[5, 6]), None)
    [5, 6]
    """
    ids = reply.completion_token_ids
    if not ids:
        return None
    return list(ids) if is_truncated(reply, max_tokens) else ids[:-1]


def raw_history_message(reply: StudentReply, style: EchoStyle = "inline",
                        think_tags: tuple[str, str] = ("<think>", "</think>")) -> dict[str, Any] | None:
    """The reply as it goes back when its generated text is known: that text whole (tool-call markup
    included) as the content, so that the chat template, which writes an assistant message's content as
    it is, renders the turn exactly as the model wrote it. Its reasoning stays inline, between the think
    tags as generated, unless the server hands a `reasoning` field to the template (`style` "field"):
    then it goes there, the rest of the text in the content (Qwen3's template keeps an empty think
    block it is given as a field, and drops one it finds inline).

    This is the text form of what multi-turn RL trainers do with token ids (TRL's GRPO tool loop, verl's
    and SkyRL's agent loops): the next prompt is the previous prompt + the completion as generated +
    the tool results, never a re-rendering of a parsed reply.

    >>> raw_history_message(StudentReply({"role": "assistant", "content": None}, text="<tool_call>x"))
    {'role': 'assistant', 'content': '<tool_call>x'}
    >>> raw_history_message(StudentReply({}, text="<think>\\n\\n</think>\\n\\n<tool_call>x"), "field")
    {'role': 'assistant', 'content': '\\n\\n<tool_call>x', 'reasoning': '\\n\\n'}
    >>> raw_history_message(StudentReply({"role": "assistant", "content": "hi"})) is None
    True
    """
    if reply.text is None:
        return None
    opening, closing = think_tags
    head, found, rest = reply.text.partition(closing)
    if style != "field" or not found:
        return {"role": "assistant", "content": reply.text}
    return {"role": "assistant", "content": rest, "reasoning": head.split(opening, 1)[-1]}


def is_truncated(reply: StudentReply, max_tokens: int | None) -> bool:
    """The reply was cut at the token limit. vLLM 0.10 reports `tool_calls` even for a cut call its
    parser could still read, so a reply that used every token it was allowed counts as cut too.

    >>> cut = StudentReply(message={"tool_calls": [{"id": "c"}]}, finish_reason="tool_calls",
    ...                    usage={"completion_tokens": 64})
    >>> is_truncated(cut, 64), is_truncated(cut, 100)
    (True, False)
    >>> is_truncated(StudentReply({}, finish_reason="length"), None)
    True
    """
    if reply.finish_reason == "length":
        return True
    used = (reply.usage or {}).get("completion_tokens")
    return bool(max_tokens and reply.tool_calls and isinstance(used, int) and used >= max_tokens)


def resolve_echo(style: EchoStyle, reasoning_field: str | None) -> EchoStyle:
    """`auto`: `field` for a server that answers `reasoning` (it reads it back), `inline` for one that
    answers `reasoning_content` only (vLLM <= 0.11 drops request reasoning), `none` for one without.

    >>> [resolve_echo("auto", name) for name in ("reasoning", "reasoning_content", None)]
    ['field', 'inline', 'none']
    """
    if style != "auto":
        return style
    return {"reasoning": "field", "reasoning_content": "inline"}.get(reasoning_field or "", "none")


def with_reasoning(message: dict[str, Any], reasoning: str | None, style: EchoStyle,
                   think_tags: tuple[str, str] = ("<think>", "</think>")) -> dict[str, Any]:
    """The assistant message as it goes back to the server (a new dict; `style` already resolved).

    >>> m = {"role": "assistant", "content": None, "tool_calls": []}
    >>> with_reasoning(m, "hm", "field")["reasoning"], with_reasoning(m, "\\nhm\\n", "inline")["content"]
    ('hm', '<think>\\nhm\\n</think>')
    >>> with_reasoning(m, "hm", "none") == m
    True
    """
    out = {key: value for key, value in message.items() if key not in REASONING_FIELDS}
    if "content" in out:
        out["content"] = echo_content(out)
    if not reasoning or style == "none":
        return out
    if style == "inline":
        out["content"] = f"{think_tags[0]}{reasoning}{think_tags[1]}{message.get('content') or ''}"
        return out
    out["reasoning"] = reasoning
    return out


def echo_content(message: dict[str, Any]) -> Any:
    """The content an assistant message goes back with: whitespace-only beside tool calls becomes "",
    and one newline before the calls is left to the template.

    vLLM's tool parsers return the text before `<tool_call>` as content, `"\\n\\n"` after a reasoning
    model's `</think>`, `"I'll look.\\n"` where the model wrote a line before its calls; Qwen3's template
    writes a newline before the first call when the content is non-empty (unstripped), so echoing either
    as it came would render one `"\\n"` the model never wrote.

    >>> echo_content({"content": "\\n\\n", "tool_calls": [{"id": "c"}]}), echo_content({"content": "\\n\\n"})
    ('', '\\n\\n')
    >>> echo_content({"content": "I'll look.\\n", "tool_calls": [{"id": "c"}]})
    "I'll look."
    """
    content = message.get("content")
    if not message.get("tool_calls") or not isinstance(content, str):
        return content
    return content.removesuffix("\n") if content.strip() else ""


def echo_history(messages: list[dict[str, Any]], style: EchoStyle,
                 think_tags: tuple[str, str] = ("<think>", "</think>")) -> list[dict[str, Any]]:
    """Every assistant message's reasoning (either field, e.g. from litellm's Anthropic adapter) written
    back in `style`: what the recording proxy does to the history Claude Code sends.

    >>> echo_history([{"role": "assistant", "content": "x", "reasoning_content": "r"}], "field")
    [{'role': 'assistant', 'content': 'x', 'reasoning': 'r'}]
    """
    out = []
    for message in messages:
        reasoning = next((message[key] for key in REASONING_FIELDS if isinstance(message.get(key), str)),
                         None)
        if message.get("role") != "assistant" or reasoning is None:
            out.append(message)
        else:
            out.append(with_reasoning(message, reasoning, style, think_tags))
    return out


def find_markup(content: str | None, markers: list[str]) -> str | None:
    """The first tool-call marker in a reply's text: a call the server's parser did not turn into
    `tool_calls` (bad JSON or XML, or a server without a tool-call parser).

    >>> find_markup('<tool_call>\\n{"name": "bash", "arguments": {"command": "ls"}\\n', ["<tool_call>"])
    '<tool_call>'
    >>> find_markup("All done.", ["<tool_call>"]) is None
    True
    """
    return next((marker for marker in markers if content and marker in content), None)
