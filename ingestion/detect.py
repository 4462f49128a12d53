"""Which agent wrote a file, from its first records — never from its path or name.

Each format is known by the keys of its first JSON records (rules as data: `configs/formats.toml`):
Claude Code lines carry `sessionId` / `uuid`; Codex CLI lines are `{timestamp, type, payload}` envelopes
(older builds: a bare session header, then bare response items); Gemini CLI writes one JSON object with
`messages` (`session-*.json`) or a header line then message records and `$set` patches
(`session-*.jsonl`); Copilot CLI writes `{type: "session.start", data, …}` events. Only the first
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
    >>> record_format({"hello": 1}) is None
    True
    """
    rules = _rules()
    kind = record.get("type")
    if "payload" in record and kind in rules["codex"]["envelope_types"]:
        return "codex"
    if isinstance(kind, str) and "." in kind and "data" in record \
            and kind.split(".")[0] in rules["copilot"]["event_prefixes"]:
        return "copilot"
    if any(key in record for key in rules["gemini"]["keys"]):
        return "gemini"
    if any(key in record for key in rules["claude_code"]["keys"]):
        return "claude_code"
    if kind in rules["gemini"]["message_types"] and "id" in record and "content" in record:
        return "gemini"
    if kind in rules["codex"]["legacy_item_types"] or record.get("record_type") == "state" or (
            "id" in record and "timestamp" in record and ("instructions" in record or "git" in record)):
        return "codex"   # the pre-envelope layout: a bare header, bare response items, state lines
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
    if not objects and path.name.endswith((".jsonl", ".jsonl.gz")):
        return "claude_code"
    if not objects and path.name.endswith(".json") and _pretty_gemini(path):
        return "gemini"
    return UNKNOWN


def _pretty_gemini(path: Path) -> bool:
    """An older Gemini CLI session, pretty-printed over many lines: its head names both keys."""
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
    return head.lstrip().startswith(b"{") and b'"sessionId"' in head and (
        b'"projectHash"' in head or b'"messages"' in head)
