"""The records of a trajectory file, whatever holds them: one whole JSON document (`*.traj.json`,
`*.traj`, ATIF `trajectory.json`), JSON lines (`output.jsonl`, dataset rows), a parquet file of rows,
or a folder written by `datasets.Dataset.save_to_disk` (read from its `dataset_info.json`).

What cannot be read is a counted file skip with its reason (`bad_json`, `not_an_object`,
`unreadable_dataset`), never an exception.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ingestion.jsonl import iter_records
from ingestion.stats import IngestStats

DATASET_INFO = "dataset_info.json"


def records(path: Path, stats: IngestStats) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every record of `path` with its number (a line or a row, from 1)."""
    if path.name == DATASET_INFO:
        yield from _saved_dataset(path, stats)
    elif path.name.endswith(".parquet"):
        yield from _parquet(path, stats)
    elif path.name.endswith((".jsonl", ".jsonl.gz")):
        yield from iter_records(path, stats)
    else:
        yield from _document(path, stats)


def _document(path: Path, stats: IngestStats) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        value = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as error:
        stats.problem(str(path), None, "bad_json", action="file", detail=str(error)[:200])
        return
    except OSError as error:
        stats.problem(str(path), None, "unreadable_file", action="file", detail=error.strerror or str(error))
        return
    if not isinstance(value, dict):
        stats.problem(str(path), None, "not_an_object", action="file", detail=type(value).__name__)
        return
    yield 1, value


def _parquet(path: Path, stats: IngestStats) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
        number = 0
        for batch in table.iter_batches(batch_size=64):
            for row in batch.to_pylist():
                number += 1
                yield number, row
    except (OSError, ValueError) as error:   # ArrowInvalid is a ValueError
        stats.problem(str(path), None, "unreadable_dataset", action="file", detail=str(error)[:200])


def _saved_dataset(path: Path, stats: IngestStats) -> Iterator[tuple[int, dict[str, Any]]]:
    from datasets import load_from_disk

    try:
        dataset = load_from_disk(str(path.parent))
        rows = dataset if not hasattr(dataset, "keys") else dataset[next(iter(dataset.keys()))]
        yield from enumerate(rows, 1)
    except (OSError, ValueError, KeyError, StopIteration) as error:
        stats.problem(str(path), None, "unreadable_dataset", action="file", detail=str(error)[:200])
