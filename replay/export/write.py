"""The export stage over a whole run: rows checked and formatted, the dataset, pairs.jsonl, the card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.export.card import run_card_info
from replay.export.checks import check_rows, load_templates
from replay.export.dataset import export_dataset, push_to_hub, write_card
from replay.export.formats import format_counts, format_rows, swap_rows
from replay.options import RunConfig
from replay.rundir.report import Report


def check_export(config: RunConfig) -> None:
    """Load what the export will need (templates, tokenizers) so a typo fails before any call."""
    from ingestion.tokens import counter_for

    load_templates(config.export)
    counter_for(config.export.tokenizer)
    if config.export.preflight_tokenizer:
        counter_for(config.export.preflight_tokenizer)


def export_pairs(config: RunConfig, out: Path, rows: list[dict[str, Any]], report: Report) -> None:
    """Length re-check and pre-flight, then the dataset, pairs.jsonl and the dataset card, into `out`."""
    fmt = config.export.format
    if config.export.swap_pairs:
        before, rows = rows, swap_rows(rows)
        report.extra["swapped"] = sum(a is not b for a, b in zip(before, rows, strict=True))
    judged, rows = rows, format_rows(rows, fmt)
    rows, checks = check_rows(rows, config.export)
    report.extra["format"] = format_counts(judged, rows, fmt)
    report.preflight_dropped = sum(checks["dropped"].values())
    report.extra["preflight_dropped_by_reason"] = checks["dropped"]
    report.extra["lengths"] = checks["lengths"]
    if checks["templates"]:
        report.extra["preflight_templates"] = checks["templates"]
    dataset = export_dataset(rows, out, test_split=config.export.test_split, fmt=fmt)
    report.extra["dataset_rows"] = len(rows)
    if config.export.test_split is not None:
        report.extra["splits"] = {name: part.num_rows for name, part in dataset.items()}
    write_card(out, run_card_info(config, rows, report))
    if config.export.push_to_hub:
        push_to_hub(out, config.export.push_to_hub)
