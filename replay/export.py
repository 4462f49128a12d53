"""Write the pairs: `DIR/dataset` (datasets.save_to_disk), `DIR/pairs.jsonl`, and the card `DIR/README.md`.

Storage decision: every chat message, tool schema and the votes are `datasets.Json()` values
(datasets >= 4.7). Arrow stores them as JSON text and `load_from_disk` gives back exactly the dicts
that were written: tool-call `arguments` stay objects (so `| tojson` templates render objects, not
quoted strings), and messages keep their own key sets (a user message gains no `tool_calls: None`,
which would trip templates that test `'tool_calls' in message`). TRL 1.16's DPOTrainer reads these
columns as they are, so `DPOTrainer(train_dataset=load_from_disk(DIR / "dataset"))` needs no conversion.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from ingestion.schema import ReplayError
from replay.files import write_lines, write_text
from replay.pairs import PAIR_COLUMNS


class ExportError(ReplayError):
    """Rows that do not fit the pair schema."""


def pair_features():
    """The datasets Features of a pair row (column order = `PAIR_COLUMNS`).

    >>> pair_features()["prompt"]
    List(Json(decode=True))
    """
    from datasets import Features, Json, List, Value

    return Features({
        "prompt": List(Json()), "chosen": List(Json()), "rejected": List(Json()), "tools": List(Json()),
        "state_id": Value("string"), "trace_id": Value("string"), "turn": Value("int64"),
        "source": Value("string"), "student_model": Value("string"),
        "teachers": List(Value("string")), "winner_teachers": List(Value("string")),
        "votes": Json(), "agreement": Value("float64"), "method": Value("string"),
        "cost_usd": Value("float64"), "match": Value("string"),
    })


JsonMemo = dict[int, tuple[Any, list[str]]]


def rows_to_dataset(rows: list[dict[str, Any]], memo: JsonMemo | None = None):
    """An in-memory Dataset of pair rows; a missing column is an error, not a column of nulls.

    The Arrow table is built here, JSON encoded with orjson, rather than by `Dataset.from_dict`
    (which encodes value by value in Python: most of an ablation's time). `memo` keeps the encoding
    of list values shared between rows and datasets (one prompt for every pool of an ablation).

    >>> rows_to_dataset([]).num_rows
    0
    """
    import pyarrow as pa
    from datasets import Dataset, DatasetInfo

    for number, row in enumerate(rows):
        missing, extra = set(PAIR_COLUMNS) - set(row), set(row) - set(PAIR_COLUMNS)
        if missing or extra:
            raise ExportError(f"pair row {number}: missing columns {sorted(missing)}, "
                              f"unknown columns {sorted(extra)}")
    features = pair_features()
    memo = {} if memo is None else memo
    columns = {column: _arrow_column(features[column], [row[column] for row in rows], memo)
               for column in PAIR_COLUMNS}
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


def _replace_dir(tmp: Path, final: Path) -> None:
    # os.replace cannot overwrite a non-empty directory: move the old one aside first, so readers
    # only ever see a complete old or a complete new dataset (and, for a moment, none).
    old = final.with_name(f".{final.name}.old.{uuid.uuid4().hex}")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def export_dataset(rows: Iterable[dict[str, Any]], out_dir: str | Path, memo: JsonMemo | None = None):
    """Write `out_dir/dataset` and `out_dir/pairs.jsonl` atomically; returns the dataset loaded from disk."""
    from datasets import load_from_disk

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    memo = {} if memo is None else memo
    dataset = rows_to_dataset(rows, memo)
    tmp = Path(tempfile.mkdtemp(prefix=".dataset.", dir=out))
    try:
        # datasets 5.2 writes an empty dataset as zero shards, which load_from_disk cannot read back.
        dataset.save_to_disk(str(tmp), num_shards=1 if not rows else None)
        _replace_dir(tmp, out / "dataset")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_lines(out / "pairs.jsonl", (_row_line(row, memo) for row in rows))
    return load_from_disk(str(out / "dataset"))


_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))
_PROVENANCE = (("sources", "Sources"), ("student_models", "Student models"), ("teachers", "Teachers"),
               ("excluded_teachers", "Excluded teachers (same family as the student)"),
               ("method", "Consensus method"), ("min_agreement", "Minimum agreement"))
_KNOWN = {key for key, _ in _PROVENANCE} | {"pairs", "counts", "cost_usd", "command", "pretty_name",
                                           "license", "confidence", "unpriced"}
_INTRO = """DPO preference pairs made by teacher-replay: at each assistant turn of an agent trace, a pool of
teacher LLMs answered; their consensus is `chosen`, the student's real action is `rejected`."""
_USE = """## Use

```python
from datasets import load_from_disk
from trl import DPOTrainer

dataset = load_from_disk("dataset")  # or load_dataset(<hub repo>, split="train")
trainer = DPOTrainer(model=..., train_dataset=dataset, processing_class=tokenizer)
```

Columns: `prompt`, `chosen`, `rejected` (OpenAI chat messages, tool-call arguments as objects),
`tools` (OpenAI tool schemas), and provenance: `state_id`, `trace_id`, `turn`, `source`,
`student_model`, `teachers` (voters), `winner_teachers`, `votes` (weight and teachers per group of
equivalent answers, winner first), `agreement`, `method`, `cost_usd` (teacher calls for the state).
"""


def _size_category(n: int) -> str:
    return next((name for limit, name in _SIZES if n < limit), "n>1M")


def _show(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} ({v})" for k, v in value.items()) or "none"
    if isinstance(value, list | tuple | set):
        return ", ".join(str(v) for v in value) or "none"
    return "none" if value is None else str(value)


def card_text(info: Mapping[str, Any]) -> str:
    """The dataset card: YAML header for the Hub, then provenance, counts, cost and the exact command.

    Known `info` keys: pairs, sources, student_models, teachers, excluded_teachers, method,
    min_agreement, counts, cost_usd, command; any other key is listed under "Run settings".

    >>> text = card_text({"pairs": 3, "teachers": ["gpt-5", "deepseek"], "command": "python -m replay.run"})
    >>> text.startswith("---\\n") and "python -m replay.run" in text and "gpt-5, deepseek" in text
    True
    """
    import yaml

    counts = dict(info.get("counts", {}))
    pairs = int(info.get("pairs", counts.get("pairs", 0)))
    header = {"pretty_name": info.get("pretty_name", "teacher-replay DPO pairs"), "language": ["en"],
              "tags": ["dpo", "preference", "tool-calling", "agents", "trl", "teacher-replay"],
              "task_categories": ["text-generation"], "size_categories": [_size_category(pairs)]}
    if info.get("license"):
        header["license"] = info["license"]
    lines = ["---", yaml.safe_dump(header, sort_keys=False).strip(), "---", "",
             f"# {header['pretty_name']}", "", _INTRO, "", "## Provenance", ""]
    lines += [f"- **{label}**: {_show(info[key])}" for key, label in _PROVENANCE if key in info]
    lines += ["", "## Counts", "", "| count | n |", "|---|---|", f"| pairs | {pairs} |"]
    lines += [f"| {k} | {_show(v)} |" for k, v in counts.items() if k != "pairs"]
    lines += confidence_lines(info.get("confidence"))
    lines += ["", "## Cost", "", f"{float(info.get('cost_usd', 0.0)):.4f} USD of teacher calls.", ""]
    if info.get("unpriced"):  # their calls count 0.0 above: say so rather than understate quietly
        lines += [f"Unpriced (counted as 0): {', '.join(sorted(info['unpriced']))}.", ""]
    if other := {k: v for k, v in info.items() if k not in _KNOWN}:
        lines += ["## Run settings", ""] + [f"- **{k}**: {_show(v)}" for k, v in other.items()] + [""]
    lines += ["## Command", "", "```", str(info.get("command", "(not recorded)")), "```", "", _USE]
    return "\n".join(lines)


def confidence_lines(confidence: Mapping[str, Mapping[str, int]] | None) -> list[str]:
    """The card's confidence section: pairs by the tier that decided (`match`) and by `agreement`.

    >>> confidence_lines({"match": {"exact": 2, "intent": 1}, "agreement": {"1.00": 2, "0.67": 1}})[5]
    '| match | exact 2 · intent 1 |'
    """
    if not confidence:
        return []
    show = {key: " · ".join(f"{k} {v}" for k, v in confidence.get(key, {}).items()) or "none"
            for key in ("match", "agreement")}
    return ["", "## Confidence", "", "| pairs by | n |", "|---|---|", f"| match | {show['match']} |",
            f"| agreement | {show['agreement']} |", "",
            "`match`: the tier that decided the consensus (`exact`: teachers wrote the same canonical "
            "action; `intent`: the same intent, written differently). `agreement`: the share of the "
            "voting teachers in the winning group."]


def write_card(out_dir: str | Path, info: Mapping[str, Any]) -> Path:
    """Write `out_dir/README.md` (see `card_text`) atomically; returns its path."""
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
