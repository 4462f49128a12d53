"""Subagent transcripts (ingestion rule 9): which files they are, their `.meta.json`, forks, warmups.

- CLI 2.0.x: `agent-<id>.jsonl` beside the session; CLI >= 2.1.2: `<session>/subagents/agent-<id>.jsonl`,
  later with `agent-<id>.meta.json` ({agentType, description, toolUseId, parentAgentId, spawnDepth});
  Workflow runs nest them as `<session>/subagents/workflows/<run>/agent-<id>.jsonl` beside a
  `journal.jsonl` that is no transcript.
- A "fork" subagent (CLI >= 2.1.117, agentType "fork") starts with a copy of the parent's whole
  conversation, then one user message holding a placeholder result for every tool call of the parent's
  turn and the fork's directive in `<fork-boilerplate>` tags. The turns before that message are the
  parent's: they give no state of the fork's (the parent's file has them).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from ingestion.stats import IngestStats

AGENT_PREFIX = "agent-"
SUBAGENTS_DIR = "subagents"
FORK_MARKERS = ("<fork-boilerplate>", "Fork started — processing in background")
META_KEYS = {"agentType": "agent_type", "description": "agent_description", "toolUseId": "tool_use_id",
             "parentAgentId": "parent_agent_id", "spawnDepth": "spawn_depth"}


def file_stem(path: Path) -> str:
    """The name without `.jsonl` / `.jsonl.gz`.

    >>> file_stem(Path("a/agent-a12.jsonl.gz")), file_stem(Path("s.jsonl"))
    ('agent-a12', 's')
    """
    name = path.name
    for suffix in (".jsonl.gz", ".jsonl"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def is_subagent_file(path: Path) -> bool:
    """A subagent transcript, by name: `agent-*.jsonl`.

    >>> is_subagent_file(Path("s/subagents/workflows/w1/agent-a1.jsonl")), is_subagent_file(Path("s.jsonl"))
    (True, False)
    """
    return path.name.startswith(AGENT_PREFIX)


def is_side_file(path: Path) -> bool:
    """A file in a session's `subagents/` folder that is no transcript (a Workflow run's journal).

    >>> is_side_file(Path("s/subagents/workflows/w/journal.jsonl"))
    True
    >>> is_side_file(Path("s/subagents/agent-a.jsonl")), is_side_file(Path("p/transcript.jsonl"))
    (False, False)
    """
    return SUBAGENTS_DIR in path.parent.parts and not is_subagent_file(path)


def agent_id_of(path: Path) -> str:
    """The agent id a subagent file's name carries.

    >>> agent_id_of(Path("agent-acompact-fffbd0.jsonl"))
    'acompact-fffbd0'
    """
    return file_stem(path).removeprefix(AGENT_PREFIX)


def folder_session(path: Path) -> str | None:
    """The session a `<session>/subagents/...` file belongs to, by its folders (None elsewhere).

    >>> folder_session(Path("p/0d3a/subagents/workflows/w/agent-a.jsonl")), folder_session(Path("p/s.jsonl"))
    ('0d3a', None)
    """
    parts = path.parent.parts
    if SUBAGENTS_DIR not in parts:
        return None
    index = len(parts) - 1 - parts[::-1].index(SUBAGENTS_DIR)
    return parts[index - 1] if index > 0 else None


def path_trace_id(path: Path) -> str:
    """The trace id of a file whose records carry no sessionId: a hash of its absolute path.

    >>> path_trace_id(Path("/x/transcript.jsonl")) == path_trace_id(Path("/x/../x/transcript.jsonl"))
    True
    """
    digest = hashlib.sha256(str(path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()
    return f"file-{digest[:16]}"


def read_meta(path: Path, stats: IngestStats) -> dict[str, Any]:
    """The `agent-<id>.meta.json` beside a subagent file, as state metadata (empty when absent).

    Bad JSON is counted (`skipped_files["bad_meta_json"]`); the transcript is read all the same.
    """
    meta_path = path.with_name(file_stem(path) + ".meta.json")
    try:
        data = orjson.loads(meta_path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, orjson.JSONDecodeError) as error:
        stats.problem(str(meta_path), None, "bad_meta_json", action="file", detail=str(error))
        return {}
    if not isinstance(data, dict):
        stats.problem(str(meta_path), None, "bad_meta_json", action="file", detail="not an object")
        return {}
    return {ours: data[theirs] for theirs, ours in META_KEYS.items() if theirs in data}


def is_fork_start(content: Any) -> bool:
    """A user message that starts a fork's own work: placeholder results and the directive.

    >>> is_fork_start([{"type": "text", "text": "<fork-boilerplate>rules</fork-boilerplate> do X"}])
    True
    >>> is_fork_start("Warmup")
    False
    """
    if isinstance(content, str):
        return FORK_MARKERS[0] in content
    if not isinstance(content, list):
        return False
    for block in content:
        if not isinstance(block, dict):
            continue
        text = block.get("text") if block.get("type") == "text" else block.get("content")
        if isinstance(text, list):
            text = " ".join(b.get("text", "") for b in text if isinstance(b, dict))
        if isinstance(text, str) and any(marker in text for marker in FORK_MARKERS):
            return True
    return False
