"""Token lengths of pair rows: the --max-length re-check at export (chosen is known only now) and the
percentiles the dataset card shows. Counted with the run's tokenizer, else the ingestion estimate
(`ingestion.budget.TokenCounter`), so export judges a row the way ingestion fitted it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ingestion.tokens import TokenCounter

PERCENTILES = (50, 90, 95, 99, 100)


def completion_sides(row: dict[str, Any]) -> tuple[str, ...]:
    """The columns holding a row's completions: `chosen` and `rejected` (DPO), else `completion`.

    >>> completion_sides({"chosen": [], "rejected": []}), completion_sides({"completion": []})
    (('chosen', 'rejected'), ('completion',))
    """
    return ("chosen", "rejected") if "chosen" in row else ("completion",)


def row_lengths(row: dict[str, Any], counter: TokenCounter) -> dict[str, int]:
    """Tokens of a row's prompt (tools included), of each completion (chosen and rejected, or the
    KTO / SFT `completion`), and of the longer sequence.

    >>> row = {"prompt": [{"role": "user", "content": "x" * 40}], "tools": [],
    ...        "chosen": [{"role": "assistant", "content": "y" * 8}], "rejected": []}
    >>> row_lengths(row, TokenCounter())
    {'prompt': 18, 'chosen': 10, 'rejected': 0, 'total': 28}
    """
    prompt = counter.tools(row.get("tools")) + sum(counter.message(m) for m in row["prompt"])
    parts = {side: sum(counter.message(m) for m in row[side]) for side in completion_sides(row)}
    return {"prompt": prompt, **parts, "total": prompt + max(parts.values())}


def percentiles(values: Iterable[int], points: tuple[int, ...] = PERCENTILES) -> dict[str, int]:
    """Nearest-rank percentiles ("p50", ..., "p100" = the maximum); empty input gives {}.

    >>> percentiles(range(1, 101), (50, 95, 100))
    {'p50': 50, 'p95': 95, 'p100': 100}
    """
    ordered = sorted(values)
    if not ordered:
        return {}
    return {f"p{p}": ordered[max(-(-p * len(ordered) // 100), 1) - 1] for p in points}


def length_summary(lengths: list[dict[str, int]], counted_with: str) -> dict[str, Any]:
    """Percentiles per part, for report.json and the card.

    >>> length_summary([{"prompt": 5, "chosen": 1, "rejected": 2, "total": 7}], "estimate")["total"]["p50"]
    7
    """
    summary: dict[str, Any] = {"counted_with": counted_with, "rows": len(lengths)}
    parts = list(lengths[0]) if lengths else ["prompt", "chosen", "rejected", "total"]
    for part in parts:
        summary[part] = percentiles(length[part] for length in lengths)
    return summary


def fit_rows(rows: list[dict[str, Any]], counter: TokenCounter, max_length: int | None
             ) -> tuple[list[dict[str, Any]], int, dict[str, Any]]:
    """Rows whose prompt + tools + longer completion fit `max_length` (all rows without one), how many
    did not, and the length summary of the rows kept."""
    kept: list[dict[str, Any]] = []
    kept_lengths: list[dict[str, int]] = []
    over = 0
    for row in rows:
        length = row_lengths(row, counter)
        if max_length is not None and length["total"] > max_length:
            over += 1
            continue
        kept.append(row)
        kept_lengths.append(length)
    return kept, over, length_summary(kept_lengths, counter.name)


def train_length(summary: dict[str, Any], max_length: int | None, step: int = 256) -> int | None:
    """The `max_length` to train with: the run's --max-length, else the longest row rounded up to `step`.

    >>> train_length({"total": {"p100": 3000}}, None), train_length({"total": {}}, 8192)
    (3072, 8192)
    """
    if max_length is not None:
        return max_length
    longest = summary.get("total", {}).get("p100")
    return None if longest is None else -(-longest // step) * step
