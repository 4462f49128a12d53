"""Write the pairs: `DIR/dataset` (datasets.save_to_disk), `DIR/pairs.jsonl`, and the card `DIR/README.md`.

Storage decision: every chat message, tool schema and the votes are `datasets.Json()` values
(datasets >= 4.7). Arrow stores them as JSON text and `load_from_disk` gives back exactly the dicts
that were written: tool-call `arguments` stay objects (so `| tojson` templates render objects, not
quoted strings), and messages keep their own key sets (a user message gains no `tool_calls: None`,
which would trip templates that test `'tool_calls' in message`). TRL 1.16's DPOTrainer reads these
columns as they are, so `DPOTrainer(train_dataset=load_from_disk(DIR / "dataset"))` needs no conversion.
"""

from __future__ import annotations

import hashlib
import itertools
import shutil
import tempfile
import uuid
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from ingestion.schema import ReplayError
from replay.export.card import card_text
from replay.export.formats import COLUMNS
from replay.rundir.files import replace_dir, write_lines, write_text

__all__ = ["ExportError", "card_text", "export_dataset", "format_features", "pair_features", "push_to_hub",
           "rows_to_dataset",
           "split_by_trace", "write_card"]


class ExportError(ReplayError):
    """Rows that do not fit the pair schema."""


def pair_features():
    """The datasets Features of a pair row (column order = `PAIR_COLUMNS`).

    >>> pair_features()["prompt"]
    List(Json(decode=True))
    """
    return format_features("dpo")


def format_features(fmt: str, extra: tuple[str, ...] = ()):
    """The datasets Features of a row of `fmt` (column order = `replay.export.formats.COLUMNS[fmt]`, then
    `extra`: `replay.verify`'s columns).

    >>> format_features("kto")["label"], format_features("sft")["completion"]
    (Value('bool'), List(Json(decode=True)))
    >>> format_features("dpo", ("value_chosen", "verified"))["verified"]
    Value('bool')
    """
    from datasets import Features, Json, List, Value

    known = {
        "prompt": List(Json()), "chosen": List(Json()), "rejected": List(Json()), "tools": List(Json()),
        "completion": List(Json()), "label": Value("bool"),
        "state_id": Value("string"), "trace_id": Value("string"), "turn": Value("int64"),
        "source": Value("string"), "student_model": Value("string"),
        "teachers": List(Value("string")), "winner_teachers": List(Value("string")),
        "votes": Json(), "agreement": Value("float64"), "method": Value("string"),
        "cost_usd": Value("float64"), "match": Value("string"), "preflight": Json(),
        "student_outcome": Value("string"), "verdict": Value("string"), "completion_from": Value("string"),
        "value_chosen": Value("float64"), "value_rejected": Value("float64"), "verified": Value("bool"),
        "flipped": Value("bool"), "verification": Json(),
    }
    return Features({column: known[column] for column in (*COLUMNS[fmt], *extra)})


JsonMemo = dict[int, tuple[Any, list[str]]]


def rows_to_dataset(rows: list[dict[str, Any]], memo: JsonMemo | None = None, fmt: str = "dpo",
                    extra: tuple[str, ...] = ()):
    """An in-memory Dataset of rows of `fmt` (pairs by default); a missing column is an error, not a
    column of nulls.

    The Arrow table is built here, JSON encoded with orjson, rather than by `Dataset.from_dict`
    (which encodes value by value in Python: most of an ablation's time). `memo` keeps the encoding
    of list values shared between rows and datasets (one prompt for every pool of an ablation).

    >>> rows_to_dataset([]).num_rows
    0
    """
    import pyarrow as pa
    from datasets import Dataset, DatasetInfo

    names = (*COLUMNS[fmt], *extra)
    for number, row in enumerate(rows):
        missing, unknown = set(names) - set(row), set(row) - set(names)
        if missing or unknown:
            raise ExportError(f"{fmt} row {number}: missing columns {sorted(missing)}, "
                              f"unknown columns {sorted(unknown)}")
    features = format_features(fmt, extra)
    memo = {} if memo is None else memo
    columns = {column: _arrow_column(features[column], [row[column] for row in rows], memo)
               for column in names}
    # A fingerprint of our own: without one, datasets pickles the whole table to hash it.
    return Dataset(pa.table(columns), info=DatasetInfo(features=features), fingerprint=uuid.uuid4().hex)


def _arrow_column(feature: Any, values: list[Any], memo: JsonMemo) -> Any:
    import pyarrow as pa
    from datasets import Json, List

    def json_array(texts: list[str]) -> Any:
        return pa.ExtensionArray.from_storage(pa.json_(), pa.array(texts, pa.string()))

    if isinstance(feature, Json):
        return json_array([orjson.dumps(value).decode() for value in values])
    if isinstance(feature, List) and isinstance(feature.feature, Json):
        encoded = [_encode_list(value, memo) for value in values]
        offsets = pa.array([0, *itertools.accumulate(len(texts) for texts in encoded)], pa.int32())
        return pa.ListArray.from_arrays(offsets, json_array([t for texts in encoded for t in texts]))
    if isinstance(feature, List):
        return pa.array(values, pa.list_(feature.feature()))
    return pa.array(values, feature())


def _row_line(row: dict[str, Any], memo: JsonMemo) -> bytes:
    """One pairs.jsonl line, reusing the JSON the dataset already holds for shared lists."""
    parts = []
    for key, value in row.items():
        hit = memo.get(id(value)) if isinstance(value, list) else None
        encoded = (f"[{','.join(hit[1])}]".encode() if hit is not None and hit[0] is value
                   else orjson.dumps(value))
        parts.append(orjson.dumps(key) + b":" + encoded)
    return b"{" + b",".join(parts) + b"}\n"


def _encode_list(value: list[Any], memo: JsonMemo) -> list[str]:
    hit = memo.get(id(value))
    if hit is not None and hit[0] is value:  # the object itself is kept, so its id cannot be reused
        return hit[1]
    texts = [orjson.dumps(item).decode() for item in value]
    memo[id(value)] = (value, texts)
    return texts


def split_by_trace(rows: list[dict[str, Any]], test_share: float) -> dict[str, list[dict[str, Any]]]:
    """`train` and `test` rows, whole traces to one side: prompts of one trace are prefixes of each
    other, so a split by row would leak. Traces are taken in the order of a hash of their id (stable
    across runs, independent of row order) into `test` while it stays within `test_share` of the rows
    (the first trace always goes, so `test` is empty only with a single trace).

    >>> rows = [{"trace_id": t} for t in "aaabbbccccdd"]
    >>> splits = split_by_trace(rows, 0.25)
    >>> {r["trace_id"] for r in splits["train"]} & {r["trace_id"] for r in splits["test"]}
    set()
    >>> len(splits["train"]) + len(splits["test"]), 0 < len(splits["test"]) <= 3
    (12, True)
    """
    sizes: dict[str, int] = {}
    for row in rows:
        sizes[row["trace_id"]] = sizes.get(row["trace_id"], 0) + 1
    order = sorted(sizes, key=lambda trace: hashlib.sha256(trace.encode()).hexdigest())
    target = test_share * len(rows)
    test: set[str] = set()
    taken = 0
    for trace in order[:-1] if len(order) > 1 else []:  # at least one trace stays in train
        if not test or taken + sizes[trace] <= target:
            test.add(trace)
            taken += sizes[trace]
    return {"train": [r for r in rows if r["trace_id"] not in test],
            "test": [r for r in rows if r["trace_id"] in test]}


def test_split_traces(dataset: Path) -> frozenset[str] | None:
    """The trace ids of the `test` split of a dataset written by `export_dataset` (`--test-split`), or
    None when it has none. A folder that is not a readable dataset raises load_from_disk's error
    (FileNotFoundError, ValueError): each caller says what that means for it."""
    from datasets import DatasetDict, load_from_disk

    data = load_from_disk(str(dataset))
    if not isinstance(data, DatasetDict) or "test" not in data:
        return None
    return frozenset(str(trace) for trace in data["test"].select_columns(["trace_id"])["trace_id"])


def export_dataset(rows: Iterable[dict[str, Any]], out_dir: str | Path, memo: JsonMemo | None = None,
                   test_split: float | None = None, fmt: str = "dpo",
                   held_out: Collection[str] | None = None, extra: tuple[str, ...] = ()):
    """Write `out_dir/dataset` and `out_dir/pairs.jsonl` atomically; returns the dataset loaded from disk.

    With `test_split`, `dataset` is a DatasetDict of `train` and `test` (see `split_by_trace`); with
    `held_out` (trace ids: `replay.ablate` keeps the run's), `test` holds those traces' rows.
    pairs.jsonl keeps every row in input order either way (the rows of `fmt`: KTO and SFT rows too,
    under the same name). `extra`: columns beyond the format's (`replay.verify`'s)."""
    from datasets import DatasetDict, load_from_disk

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    memo = {} if memo is None else memo
    tmp = Path(tempfile.mkdtemp(prefix=".dataset.", dir=out))
    try:
        if test_split is None and held_out is None:
            # datasets 5.2 writes an empty dataset as zero shards, which load_from_disk cannot read back.
            rows_to_dataset(rows, memo, fmt, extra).save_to_disk(str(tmp), num_shards=1 if not rows else None)
        else:
            splits = split_by_trace(rows, test_split) if held_out is None else {
                "train": [r for r in rows if r["trace_id"] not in held_out],
                "test": [r for r in rows if r["trace_id"] in held_out]}
            parts = {name: rows_to_dataset(part, memo, fmt, extra) for name, part in splits.items()}
            DatasetDict(parts).save_to_disk(
                str(tmp), num_shards={name: 1 for name, part in splits.items() if not part} or None)
        replace_dir(tmp, out / "dataset")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_lines(out / "pairs.jsonl", (_row_line(row, memo) for row in rows))
    return load_from_disk(str(out / "dataset"))


def write_card(out_dir: str | Path, info: Mapping[str, Any]) -> Path:
    """Write `out_dir/README.md` (see `replay.export.card.card_text`) atomically; returns its path."""
    path = Path(out_dir) / "README.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, card_text(info))
    return path


def push_to_hub(out_dir: str | Path, repo: str, private: bool | None = None,
                token: str | None = None) -> None:
    """Upload `out_dir/dataset` with datasets, then put our card on it, keeping the YAML that
    datasets wrote (`dataset_info`, `configs`) so the Hub still knows the features. Not tested online."""
    from datasets import load_from_disk
    from huggingface_hub import DatasetCard

    out = Path(out_dir)
    load_from_disk(str(out / "dataset")).push_to_hub(repo, private=private, token=token)
    if not (out / "README.md").exists():
        return
    import yaml

    ours = DatasetCard((out / "README.md").read_text(encoding="utf-8"))
    theirs = DatasetCard.load(repo, token=token).data.to_dict()
    header = {**theirs, **ours.data.to_dict()}
    header.update({key: theirs[key] for key in ("dataset_info", "configs") if key in theirs})
    card = DatasetCard(f"---\n{yaml.safe_dump(header, sort_keys=False)}---\n{ours.text}")
    card.push_to_hub(repo, token=token)
