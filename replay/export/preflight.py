"""TRL pre-flight: render every pair through chat templates as DPOTrainer will, and say what breaks.

DPOTrainer (TRL 1.16) tokenizes `prompt` with `add_generation_prompt=True`, then `prompt + chosen` and
`prompt + rejected`, all with `tools=`. When the prompt's tokens are not a prefix of the others
(templates that render history differently once a reply follows, or tokens merging across the
boundary), TRL cuts at the common prefix and trains on a context the model never sees at inference.

Two uses:

- `--preflight-tokenizer PATH` (the tokenizer you train with): rows it cannot render, or not as a token
  prefix, or with a tool call it does not show, or with chosen and rejected rendering the same, or longer
  than `--max-length`, are dropped and counted (`DROP_REASONS`); what it flags but keeps (text dropped
  beside a tool call) goes in the `preflight` column under `tokenizer: <name>`.
- `--preflight-template NAMES` (any number of templates: shipped names, .jinja files, tokenizers):
  nothing is dropped; each row's problems per template go in the `preflight` column (template → list of
  problem codes, [] = passes) and pass rates in report.json and the card, so a user training on one of
  them filters the rows it cannot express instead of letting the trainer fail.

Problem codes (`PROBLEMS`): the template raised (`template_error`, e.g. Llama 3.1 with parallel tool calls,
Gemma 3 with tool turns); the prompt is not a prefix of prompt + chosen / rejected (as text, and as
tokens with a tokenizer); a tool call (its name or an argument value) or a message's text is missing from
the rendered text (`tool_calls_not_rendered`, `content_not_rendered`: templates without tool support,
Hermes dropping text beside tool calls); chosen and rejected render the same; too long (tokenizer only).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from replay.export.lengths import completion_sides
from replay.export.templates import ChatTemplate, TemplateError, tokenizer_template

# With the tokenizer you train with, these make a row harmful or useless: it is dropped.
# `prompt_not_prefix_of_completion`: the same check for KTO and SFT rows (replay.export.formats).
DROP_REASONS = ("template_error", "prompt_not_prefix_of_chosen", "prompt_not_prefix_of_rejected",
                "prompt_not_prefix_of_completion", "tool_calls_not_rendered", "chosen_equals_rejected",
                "too_long")
PROBLEMS = ("template_error", "prompt_not_prefix_of_chosen", "prompt_not_prefix_of_rejected",
            "prompt_not_prefix_of_completion", "tool_calls_not_rendered", "content_not_rendered",
            "chosen_equals_rejected", "too_long")


def load_tokenizer(tokenizer: Any):
    """A tokenizer object as is, or one loaded from a path or Hub name."""
    if isinstance(tokenizer, str | Path):
        from ingestion.tokens import load_tokenizer as load

        return load(str(tokenizer))
    return tokenizer


def _tools(row: dict[str, Any]) -> Any:
    tools = row.get("tools")
    return json.loads(tools) if isinstance(tools, str) else tools  # as TRL does


def training_template(tokenizer: Any, name: str = "tokenizer") -> ChatTemplate | None:
    """The chat template of the tokenizer you train with (None when it has no single template)."""
    try:
        return tokenizer_template(tokenizer, name)
    except TemplateError:
        return None


def check_row(row: dict[str, Any], tokenizer: Any, max_length: int | None = None) -> str | None:
    """The reason to drop one row under the tokenizer you train with (see `DROP_REASONS`), or None.

    Tokenized as TRL's DPOTrainer tokenizes it (`apply_chat_template` with `tools=`, the prompt with
    `add_generation_prompt=True`), so what passes here passes there."""
    template = tokenizer if isinstance(tokenizer, ChatTemplate) else training_template(tokenizer)
    if template is None:
        return "template_error"
    codes, _ = row_problems(row, template, max_length)
    return next((code for code in codes if code in DROP_REASONS), None)


def preflight(rows: Iterable[dict[str, Any]], tokenizer: Any,
              max_length: int | None = None) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Rows that render cleanly through `tokenizer` (a path, Hub name or tokenizer object), and a
    Counter of drop reasons for the rest. Input rows are not modified."""
    template = training_template(load_tokenizer(tokenizer))
    kept: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    for row in rows:
        reason = check_row(row, template, max_length) if template is not None else "template_error"
        if reason is None:
            kept.append(row)
        else:
            dropped[reason] += 1
    return kept, dropped


# --- checking rows against named templates, flagging instead of dropping ------------------------------

def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def appears(value: Any, text: str) -> bool:
    """Whether a value shows in rendered text: as is (stripped, as templates `trim`), JSON-escaped
    (templates that `tojson` a string), or as a JSON / Python scalar.

    >>> appears('say "hi"\\n', '{"content": "say \\\\"hi\\\\""}'), appears(600, '"timeout": 600')
    (True, True)
    >>> appears("rm -rf build", "<tool_call>ls</tool_call>")
    False
    """
    if isinstance(value, str):
        value = value.strip()
        return (not value or value in text or json.dumps(value, ensure_ascii=False)[1:-1] in text
                or json.dumps(value)[1:-1] in text)
    return json.dumps(value) in text or str(value) in text


def missing_parts(message: dict[str, Any], text: str) -> list[str]:
    """Problem codes for parts of one message that `text` does not show.

    >>> call = {"function": {"name": "Bash", "arguments": {"command": "ls -la"}}}
    >>> missing_parts({"role": "assistant", "content": "Listing.", "tool_calls": [call]}, "Listing.")
    ['tool_calls_not_rendered']
    """
    problems = []
    if not appears(message.get("content") or "", text):
        problems.append("content_not_rendered")
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        if not appears(function.get("name") or "", text) or \
                not all(appears(leaf, text) for leaf in _leaves(function.get("arguments"))):
            problems.append("tool_calls_not_rendered")
            break
    return problems


def row_problems(row: dict[str, Any], template: ChatTemplate,
                 max_length: int | None = None) -> tuple[list[str], str | None]:
    """Problem codes of one row under one template ([] = it trains as is), and the template's error
    message when it raised."""
    from jinja2 import TemplateError

    tools = _tools(row)
    try:
        prompt = template.render(row["prompt"], tools, add_generation_prompt=True)
        rendered = {side: template.render(row["prompt"] + row[side], tools) for side in completion_sides(row)}
    except (TemplateError, ValueError, TypeError, KeyError, AttributeError) as error:
        return ["template_error"], f"{type(error).__name__}: {error}"[:200]
    problems: set[str] = set()
    for name, full in rendered.items():
        prefix = full.startswith(prompt)
        if not prefix:
            problems.add(f"prompt_not_prefix_of_{name}")
        tail = full[len(prompt):] if prefix else full
        for message in row[name]:
            problems.update(missing_parts(message, tail))
    for message in row["prompt"]:
        problems.update(missing_parts(message, prompt))
    if "chosen" in rendered and rendered["chosen"] == rendered["rejected"]:
        problems.add("chosen_equals_rejected")
    if template.tokenizer is not None:
        problems.update(_token_problems(row, template, tools, max_length))
    return [code for code in PROBLEMS if code in problems], None


def _token_problems(row: dict[str, Any], template: ChatTemplate, tools: Any,
                    max_length: int | None) -> list[str]:
    prompt = template.ids(row["prompt"], tools, add_generation_prompt=True)
    problems = []
    longest = 0
    for name in completion_sides(row):
        ids = template.ids(row["prompt"] + row[name], tools)
        longest = max(longest, len(ids))
        if ids[:len(prompt)] != prompt:
            problems.append(f"prompt_not_prefix_of_{name}")
    if max_length is not None and longest > max_length:
        problems.append("too_long")
    return problems


def check_templates(rows: list[dict[str, Any]], templates: list[ChatTemplate],
                    max_length: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every row with its `preflight` column filled (template name → problem codes), and per template
    the counts report.json and the card show. Input rows are not modified."""
    stats: dict[str, Any] = {}
    columns: list[dict[str, list[str]]] = [{} for _ in rows]
    for template in templates:
        problems: Counter[str] = Counter()
        errors: Counter[str] = Counter()
        passed = 0
        for column, row in zip(columns, rows, strict=True):
            codes, error = row_problems(row, template, max_length)
            column[template.name] = codes
            passed += not codes
            problems.update(codes)
            if error:
                errors[error] += 1
        stats[template.name] = {"rows": len(rows), "passed": passed,
                                "pass_rate": round(passed / len(rows), 4) if rows else None,
                                "problems": dict(problems.most_common()),
                                "errors": dict(errors.most_common(5)), "source": template.source}
    return [{**row, "preflight": {**row.get("preflight", {}), **column}}
            for row, column in zip(rows, columns, strict=True)], stats
