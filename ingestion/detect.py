"""Which agent wrote a file, from its first records — never from its path or name.

Each format is known by the keys of its first JSON records (rules as data: `configs/formats.toml`):
Claude Code lines carry `sessionId` / `uuid`; Codex CLI lines are `{timestamp, type, payload}` envelopes
(older builds: a bare session header, then bare response items); Gemini CLI writes one JSON object with
`messages` (`session-*.json`) or a header line then message records and `$set` patches
(`session-*.jsonl`); Copilot CLI writes `{type: "session.start", data, …}` events; agent-lightning 0.3's
span streams carry `rollout_id` / `sequence_id` / `span_id` on every line, a saved Gateway export starts
with its `agl_gateway_export` header (ingestion/agent_lightning/). Only the first
`SNIFF_LINES` lines (each cut at `SNIFF_BYTES`) are read; lines split on `\\n` alone.
"""

from __future__ import annotations

import gzip
import tomllib
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from configs import config_path

SNIFF_LINES = 8
SNIFF_BYTES = 1 << 20
UNKNOWN = "unknown"


@lru_cache(maxsize=1)
def _rules() -> dict[str, Any]:
    return tomllib.loads(config_path("formats.toml").read_text(encoding="utf-8"))


def record_format(record: dict[str, Any]) -> str | None:
    """The format one JSON record belongs to, or None when it says nothing.

    >>> record_format({"type": "session_meta", "payload": {"id": "x"}})
    'codex'
    >>> record_format({"type": "user", "sessionId": "s", "uuid": "u"})
    'claude_code'
    >>> record_format({"sessionId": "s", "projectHash": "h", "messages": []})
    'gemini'
    >>> record_format({"type": "session.start", "data": {"sessionId": "s"}})
    'copilot'
    >>> record_format({"type": "agl_gateway_export", "version": 1})
    'agl_gateway'
    >>> record_format({"hello": 1}) is None
    True
    """
    rules = _rules()
    kind = record.get("type")
    agl = rules["agent_lightning"]
    if kind == agl["export_type"]:
        return "agl_gateway"
    if all(key in record for key in agl["span_keys"]):
        return "agl_spans"
    if "payload" in record and kind in rules["codex"]["envelope_types"]:
        return "codex"
    if isinstance(kind, str) and "." in kind and "data" in record \
            and kind.split(".")[0] in rules["copilot"]["event_prefixes"]:
        return "copilot"
    if any(key in record for key in rules["gemini"]["keys"]):
        return "gemini"
    if any(key in record for key in rules["claude_code"]["keys"]):
        return "claude_code"
    found = trajectory_format(record)
    if found is not None:
        return found
    if kind in rules["gemini"]["message_types"] and "id" in record and "content" in record:
        return "gemini"
    if kind in rules["codex"]["legacy_item_types"] or record.get("record_type") == "state" or (
            "id" in record and "timestamp" in record and ("instructions" in record or "git" in record)):
        return "codex"   # the pre-envelope layout: a bare header, bare response items, state lines
    return None


def trajectory_format(record: dict[str, Any]) -> str | None:
    """The trajectory format (configs/formats.toml `[trajectories]`) whose key set `record` holds.

    >>> trajectory_format({"schema_version": "ATIF-v1.5", "agent": {}, "steps": []})
    'atif'
    >>> trajectory_format({"messages": [], "instance_id": "x"}), trajectory_format({"messages": []})
    ('trajectory_dataset', None)
    """
    rules = _rules()["trajectories"]
    for name in rules["order"]:
        if any(all(key in record for key in keys) for keys in rules[name]):
            return name
    return None


def _head_trajectory(head: bytes) -> str | None:
    """The trajectory format of a pretty-printed JSON file, from the keys named in its first MiB."""
    if not head.lstrip().startswith(b"{"):
        return None
    rules = _rules()["trajectories"]
    for name in rules["order"]:
        if any(all(b'"%s"' % key.encode() in head for key in keys) for keys in rules[name]):
            return name
    return None


def _head_lines(path: Path) -> list[bytes]:
    opener = gzip.open if path.name.endswith(".gz") else open
    lines: list[bytes] = []
    with opener(path, "rb") as handle:
        for _ in range(SNIFF_LINES):
            line = handle.readline(SNIFF_BYTES)
            if not line:
                break
            if line.strip():
                lines.append(line)
    return lines


def sniff(path: Path) -> str:
    """The format of a readable file: `claude_code`, `codex`, `gemini`, `copilot`, or `unknown`.

    A file whose first lines hold no JSON object at all (garbage, a half-written line) is `unknown`
    unless it is named like a session log (`*.jsonl`): those keep going to the Claude Code reader, which
    counts every bad line, as before formats were sniffed.
    """
    try:
        lines = _head_lines(path)
    except (OSError, EOFError, zlib.error):   # gzip.BadGzipFile is an OSError
        lines = []
    objects = 0
    for line in lines:
        if line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            objects += 1
            found = record_format(value)
            if found is not None:
                return found
    if not objects:   # binary (parquet), pretty-printed, or a first line longer than the sniff
        head = _head(path)
        if path.name.endswith(".json") and _pretty_gemini(head):
            return "gemini"
        found = _parquet_format(path) if head.startswith(b"PAR1") else _head_trajectory(head)
        if found is not None and found != UNKNOWN:
            return found
    if not objects and path.name.endswith((".jsonl", ".jsonl.gz")):
        return "claude_code"
    return UNKNOWN


def _head(path: Path) -> bytes:
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as handle:
            return handle.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return b""


def _parquet_format(path: Path) -> str:
    """A parquet file of trajectory rows (its columns name a trajectory dataset's keys), else unknown."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except (OSError, ValueError) as error:   # pyarrow's ArrowInvalid is a ValueError
        del error
        return UNKNOWN
    return trajectory_format(dict.fromkeys(names)) or UNKNOWN


def _pretty_gemini(head: bytes) -> bool:
    """An older Gemini CLI session, pretty-printed over many lines: its head names both keys.

    >>> _pretty_gemini(b' {"sessionId": "s", "messages": []}'), _pretty_gemini(b'{"steps": []}')
    (True, False)
    """
    return head.lstrip().startswith(b"{") and b'"sessionId"' in head and (
        b'"projectHash"' in head or b'"messages"' in head)
