"""What happens to pair rows between the teachers and the dataset: the --max-length re-check, the
pre-flight with the training tokenizer (both drop, counted), the named-template checks (flag only),
and the length statistics. Returns plain dicts for report.json and the card."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ingestion.tokens import counter_for
from replay.export.lengths import fit_rows
from replay.export.preflight import (
    DROP_REASONS,
    check_templates,
    load_tokenizer,
    row_problems,
    training_template,
)
from replay.export.templates import ChatTemplate, load_template
from replay.options import ExportOptions


def load_templates(options: ExportOptions) -> list[ChatTemplate]:
    """The --preflight-template list, loaded (one clear error for a name that loads nothing)."""
    return [load_template(spec) for spec in options.preflight_templates]


def check_rows(rows: list[dict[str, Any]], options: ExportOptions,
               templates: list[ChatTemplate] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows to export and what was found: {"dropped": {reason: n}, "lengths": ..., "templates": ...}."""
    dropped: Counter[str] = Counter()
    template_stats: dict[str, Any] = {}
    total = len(rows)
    if options.preflight_tokenizer:
        name = f"tokenizer: {_short(options.preflight_tokenizer)}"
        template = training_template(load_tokenizer(options.preflight_tokenizer), name)
        kept = []
        for row in rows:
            codes = row_problems(row, template, options.max_length)[0] if template else ["template_error"]
            reason = next((code for code in codes if code in DROP_REASONS), None)
            if reason is None:  # kept, with what the tokenizer still flags (text beside calls dropped)
                kept.append({**row, "preflight": {**row.get("preflight", {}), name: codes}})
            else:
                dropped[reason] += 1
        rows = kept
        template_stats[name] = {
            "rows": total, "passed": len(rows), "pass_rate": round(len(rows) / total, 4) if total else None,
            "problems": dict(dropped), "source": "--preflight-tokenizer (failing rows dropped)"}
    # With the training tokenizer, its rendered length was checked above; else count as ingestion did.
    limit = None if options.preflight_tokenizer else options.max_length
    rows, over, lengths = fit_rows(rows, counter_for(options.tokenizer), limit)
    if over:
        dropped["too_long"] += over
    templates = load_templates(options) if templates is None else templates
    if templates:
        rows, stats = check_templates(rows, templates, options.max_length)
        template_stats.update(stats)
    return rows, {"dropped": dict(dropped), "lengths": lengths, "templates": template_stats}


def _short(spec: str) -> str:
    """A tokenizer's name for the card: the Hub name, or the folder's last part (never a full path)."""
    return spec.rstrip("/").rsplit("/", 1)[-1] if spec.startswith(("/", "~", ".")) else spec
