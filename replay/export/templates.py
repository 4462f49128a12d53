"""Chat templates to pre-flight pairs against: the real open-model templates shipped in
`configs/chat_templates/` (by name), a `.jinja` file, or a tokenizer (local path or Hub name).

Rendering goes through transformers' own renderer (`render_jinja_template`, what `apply_chat_template`
uses: the sandbox, `tojson`, `raise_exception`, `strftime_now`), so a row renders here exactly as it
renders in the trainer. A named template or a `.jinja` file has no tokenizer: it is checked as text;
a tokenizer is checked as tokens too.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from configs import config_path
from ingestion.schema import ReplayError
from ingestion.tokens import load_tokenizer

TEMPLATES_DIR = "chat_templates"


class TemplateError(ReplayError):
    """A --preflight-template that names nothing we can load."""


@dataclass(frozen=True)
class ChatTemplate:
    """One template to check rows against."""

    name: str                                   # how report.json, the card and the column call it
    text: str                                   # the Jinja source
    source: str = ""                            # where it comes from (shown in the card)
    special: dict[str, str] = field(default_factory=dict)  # bos_token / eos_token the template may use
    tokenizer: Any = None                       # set when the template came with its tokenizer

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               add_generation_prompt: bool = False) -> str:
        """The text of a conversation, as `apply_chat_template(..., tokenize=False)` gives it."""
        from transformers.utils.chat_template_utils import render_jinja_template

        rendered, _ = render_jinja_template(conversations=[messages], tools=tools or None,
                                            chat_template=self.text,
                                            add_generation_prompt=add_generation_prompt, **self.special)
        return rendered[0]

    def ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
            add_generation_prompt: bool = False) -> list[int]:
        """Token ids the way TRL's DPOTrainer gets them (needs a tokenizer)."""
        encoded = self.tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=True,
                                                     return_dict=True, chat_template=self.text,
                                                     add_generation_prompt=add_generation_prompt)
        return list(encoded["input_ids"])


@lru_cache(maxsize=1)
def shipped() -> dict[str, dict[str, Any]]:
    """The named templates: name → entry of configs/chat_templates/templates.toml.

    >>> sorted(shipped())
    ['gemma3', 'hermes', 'llama3.1', 'qwen3', 'qwen3_coder']
    """
    with open(config_path(f"{TEMPLATES_DIR}/templates.toml"), "rb") as handle:
        return tomllib.load(handle)


def named_template(name: str) -> ChatTemplate:
    """A shipped template by name.

    >>> t = named_template("llama3.1")
    >>> t.special["bos_token"], "single tool-calls" in t.text
    ('<|begin_of_text|>', True)
    """
    entry = shipped()[name]
    text = config_path(f"{TEMPLATES_DIR}/{entry['file']}").read_text(encoding="utf-8")
    special = {key: entry[key] for key in ("bos_token", "eos_token") if key in entry}
    return ChatTemplate(name=name, text=text, source=f"{entry['model']}; {entry['source']}", special=special)


def tokenizer_template(tokenizer: Any, name: str) -> ChatTemplate:
    """The chat template a tokenizer carries, checked with that tokenizer."""
    text = getattr(tokenizer, "chat_template", None)
    if not isinstance(text, str):
        raise TemplateError(f"--preflight-template {name}: the tokenizer has no (single) chat template")
    special = {key: value for key in ("bos_token", "eos_token")
               if isinstance(value := getattr(tokenizer, key, None), str)}
    return ChatTemplate(name=name, text=text, source="tokenizer", special=special, tokenizer=tokenizer)


def load_template(spec: str) -> ChatTemplate:
    """A shipped name, a .jinja file or a tokenizer path / Hub name; one clear error otherwise."""
    if spec in shipped():
        return named_template(spec)
    path = Path(spec).expanduser()
    if path.suffix in (".jinja", ".j2") and path.is_file():
        return ChatTemplate(name=path.stem, text=path.read_text(encoding="utf-8"), source="file")
    names = ", ".join(sorted(shipped()))
    if not path.exists() and (spec.startswith(("/", ".", "~")) or path.suffix in (".jinja", ".j2")):
        raise TemplateError(f"--preflight-template {spec}: no such file, and not a shipped template "
                            f"({names})")
    try:
        tokenizer = load_tokenizer(spec)
    except ReplayError as error:
        raise TemplateError(f"--preflight-template {spec}: not a shipped template ({names}), a .jinja file "
                            f"or a tokenizer that loads ({error})") from None
    return tokenizer_template(tokenizer, path.name if path.exists() else spec)
