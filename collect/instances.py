"""SWE-bench instances: reading the file, checking each row, naming its image and rollout file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from collect.config import CollectError

# What a rollout needs, and what grading needs on top: swebench>=5 grades with the instance's own
# eval_script and log_parser (the harness no longer derives them from the repo), so rows from older
# SWE-bench exports can be rolled out but not evaluated.
ROLLOUT_FIELDS = ("instance_id", "problem_statement")
EVALUATE_FIELDS = ("repo", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "eval_script", "log_parser")


def load_instances(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file or a JSON list. A row that is not an object is kept, to be reported per row."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CollectError(f"cannot read instances file {path}: {exc}") from exc
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise CollectError(f"{path} is not valid JSON: {exc}") from exc
        return list(rows)
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            rows.append({"_line": number, "_error": "invalid JSON"})
    if not rows:
        raise CollectError(f"{path} holds no instances")
    return rows


def instance_label(row: Any, index: int) -> str:
    """How reports name a row, even one without an instance_id.

    >>> instance_label({"instance_id": "a__b-1"}, 0), instance_label({}, 3)
    ('a__b-1', '#4')
    """
    if isinstance(row, dict) and isinstance(row.get("instance_id"), str) and row["instance_id"]:
        return row["instance_id"]
    return f"#{index + 1}"


def check_instance(row: Any, evaluate: bool) -> str | None:
    """Why this row cannot be run, or None.

    >>> check_instance({"instance_id": "a__b-1", "problem_statement": "x"}, evaluate=False) is None
    True
    >>> check_instance({"instance_id": "a__b-1"}, evaluate=False)
    'missing field problem_statement'
    """
    if not isinstance(row, dict):
        return "row is not a JSON object"
    if "_error" in row:
        return f"line {row.get('_line')}: {row['_error']}"
    wanted = ROLLOUT_FIELDS + (EVALUATE_FIELDS if evaluate else ())
    missing = [name for name in wanted if row.get(name) in (None, "")]
    if missing:
        why = "missing field" + ("s " if len(missing) > 1 else " ") + ", ".join(missing)
        extra = [name for name in missing if name in EVALUATE_FIELDS]
        return why + (" (needed by --evaluate)" if extra else "")
    if not isinstance(row["instance_id"], str) or not re.fullmatch(r"[\w.\-]+", row["instance_id"]):
        return f"instance_id {row['instance_id']!r} is not a plain name"
    if not isinstance(row["problem_statement"], str):
        return "problem_statement is not a string"
    return None


def duplicates(rows: list[Any]) -> dict[int, str]:
    """Rows whose instance_id an earlier row already has (they would share a rollout file), with why.

    >>> duplicates([{"instance_id": "a"}, {"instance_id": "b"}, {"instance_id": "a"}])
    {2: 'duplicate instance_id a (row 1 has it)'}
    """
    first: dict[str, int] = {}
    found = {}
    for index, row in enumerate(rows):
        instance_id = row.get("instance_id") if isinstance(row, dict) else None
        if not isinstance(instance_id, str):
            continue
        if instance_id in first:
            found[index] = f"duplicate instance_id {instance_id} (row {first[instance_id] + 1} has it)"
        else:
            first[instance_id] = index
    return found


def image_name(instance_id: str, namespace: str = "swebench", tag: str = "latest") -> str:
    """The SWE-bench instance image; docker repository names are lower case (the harness does the same).

    >>> image_name("astropy__astropy-12907")
    'swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest'
    >>> image_name("Foo__Bar-1", namespace="local", tag="v2")
    'local/sweb.eval.x86_64.foo_1776_bar-1:v2'
    """
    repository = f"{namespace}/sweb.eval.x86_64.{instance_id.replace('__', '_1776_')}".lower()
    return f"{repository}:{tag}"


def rollout_filename(instance_id: str, sample: int = 0) -> str:
    """`<instance_id>.rollout.jsonl`; the other samples of an instance (`--samples N`): `.s<k>` before it.

    >>> rollout_filename("astropy__astropy-12907"), rollout_filename("a__b-1", 2)
    ('astropy__astropy-12907.rollout.jsonl', 'a__b-1.s2.rollout.jsonl')
    """
    return f"{instance_id}.s{sample}.rollout.jsonl" if sample else f"{instance_id}.rollout.jsonl"


def eval_instance(row: dict[str, Any], image: str) -> dict[str, Any]:
    """The row as swebench's make_test_spec wants it, graded on the image the rollout ran in.

    >>> eval_instance({"repo": "a/b"}, "img")["eval_type"], eval_instance({"repo": "a/b"}, "img")["image"]
    ('pass_and_fail', 'img')
    """
    # Rows carry eval_type in swebench>=5 exports; older ones are the pytest-style default.
    return {**row, "image": image, "eval_type": row.get("eval_type") or "pass_and_fail"}
