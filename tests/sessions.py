"""Tiny Claude Code session files built in tests, one record helper per kind."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

SESSION = "11111111-2222-3333-4444-555555555555"


def envelope(uuid: str, parent: str | None, kind: str, ts: str, **extra: Any) -> dict[str, Any]:
    return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/repo",
            "sessionId": SESSION, "version": "2.0.37", "gitBranch": "main", "type": kind,
            "uuid": uuid, "timestamp": ts, **extra}


def user(uuid: str, parent: str | None, content: Any, ts: str = "2025-11-17T11:00:00.000Z",
         **extra: Any) -> dict[str, Any]:
    return envelope(uuid, parent, "user", ts, message={"role": "user", "content": content}, **extra)


def assistant(uuid: str, parent: str | None, msg_id: str, block: dict[str, Any],
              ts: str = "2025-11-17T11:00:01.000Z", model: str = "claude-sonnet-4-5-20250929",
              **extra: Any) -> dict[str, Any]:
    return envelope(uuid, parent, "assistant", ts, requestId=f"req_{msg_id}",
                    message={"id": msg_id, "type": "message", "role": "assistant", "model": model,
                             "content": [block], "stop_reason": None, "usage": {"output_tokens": 1}},
                    **extra)


def system(uuid: str, parent: str | None, subtype: str, ts: str = "2025-11-17T11:00:02.000Z",
           **extra: Any) -> dict[str, Any]:
    return envelope(uuid, parent, "system", ts, subtype=subtype, **extra)


def attachment(uuid: str, parent: str | None, body: dict[str, Any],
               ts: str = "2025-11-17T11:00:02.000Z") -> dict[str, Any]:
    return envelope(uuid, parent, "attachment", ts, attachment=body)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "EqQBCkYIBxgCKkB"}


def tool_use(call_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}


def tool_result(call_id: str, output: str) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": output}]


def lines_of(records: list[dict[str, Any] | bytes]) -> bytes:
    """Records as JSONL bytes (dicts become JSON lines; bytes are kept as they are)."""
    return b"".join(r if isinstance(r, bytes) else json.dumps(r).encode() + b"\n" for r in records)


def write_session(folder: Path, records: list[dict[str, Any] | bytes], name: str = SESSION,
                  gz: bool = False) -> Path:
    """Write records to `folder/<name>.jsonl` (or `.jsonl.gz`, gzipped)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl{'.gz' if gz else ''}"
    data = lines_of(records)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def with_session(records: list[dict[str, Any]], session_id: str | None, msg_tag: str = "",
                 **extra: Any) -> list[dict[str, Any]]:
    """The same records under another sessionId (None: without one), plus envelope fields; a `msg_tag`
    makes the message ids its own (another conversation, not a copy)."""
    out = []
    for record in records:
        changed = {**record, **extra}
        if msg_tag and isinstance(record.get("message"), dict) and "id" in record["message"]:
            changed["message"] = {**record["message"], "id": record["message"]["id"] + msg_tag}
        if session_id is None:
            changed.pop("sessionId", None)
        else:
            changed["sessionId"] = session_id
        out.append(changed)
    return out


def basic_session() -> list[dict[str, Any]]:
    """prompt → Bash call → result → final text: two turns."""
    return [
        user("u1", None, "list the files"),
        assistant("a1", "u1", "msg_1", tool_use("toolu_1", "ls")),
        user("u2", "a1", tool_result("toolu_1", "a.py\nb.py")),
        assistant("a2", "u2", "msg_2", text("There are two files.")),
    ]
