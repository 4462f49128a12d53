"""A long Claude Code session built in code: `turns` Bash calls, each result `output_chars` long, so a
trace has `turns` states whose prompts each extend the one before (for --trace-parallel tests/benches)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tests.sessions import assistant, tool_result, tool_use, user, write_session


def long_session(turns: int, output_chars: int = 2_000, preamble_chars: int = 0,
                 tag: str = "") -> list[dict[str, Any]]:
    """`preamble_chars`: a long first prompt (pasted context), which every later request repeats; `tag`
    makes the ids (and the first prompt) this session's own."""
    preamble = "".join(f"line {i}: the project's conventions, repeated context\n"
                       for i in range(preamble_chars // 40))
    records = [user(f"{tag}u0", None, f"explore the repository {tag} and fix the failing test\n" + preamble)]
    parent = f"{tag}u0"
    body = "def f(x):\n    return x * 2  # " * (output_chars // 32)
    for i in range(turns):
        call = tool_use(f"toolu_{tag}{i}", f"cat src/file_{i}.py")
        records.append(assistant(f"{tag}a{i}", parent, f"msg_{tag}{i}", call))
        seed = hashlib.sha256(f"{tag}{i}".encode()).hexdigest()
        output = (f"# file {i} {seed}\n" + body)[:output_chars]
        records.append(user(f"{tag}u{i + 1}", f"{tag}a{i}", tool_result(f"toolu_{tag}{i}", output)))
        parent = f"{tag}u{i + 1}"
    return records


def write_long_session(folder: Path, turns: int, output_chars: int = 2_000, preamble_chars: int = 0) -> Path:
    return write_session(folder, long_session(turns, output_chars, preamble_chars))
