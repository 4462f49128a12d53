"""A long Claude Code session built in code: `turns` Bash calls, each result `output_chars` long, so a
trace has `turns` states whose prompts each extend the one before (for --trace-parallel tests/benches)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tests.sessions import assistant, tool_result, tool_use, user, write_session


def long_session(turns: int, output_chars: int = 2_000, preamble_chars: int = 0) -> list[dict[str, Any]]:
    """`preamble_chars`: a long first prompt (pasted context), which every later request repeats."""
    preamble = "".join(f"line {i}: the project's conventions, repeated context\n"
                       for i in range(preamble_chars // 40))
    records = [user("u0", None, "explore the repository and fix the failing test\n" + preamble)]
    parent = "u0"
    for i in range(turns):
        call = tool_use(f"toolu_{i}", f"cat src/file_{i}.py")
        records.append(assistant(f"a{i}", parent, f"msg_{i}", call))
        seed = hashlib.sha256(str(i).encode()).hexdigest()
        body = "def f(x):\n    return x * 2  # " * (output_chars // 32)
        output = (f"# file {i} {seed}\n" + body)[:output_chars]
        records.append(user(f"u{i + 1}", f"a{i}", tool_result(f"toolu_{i}", output)))
        parent = f"u{i + 1}"
    return records


def write_long_session(folder: Path, turns: int, output_chars: int = 2_000, preamble_chars: int = 0) -> Path:
    return write_session(folder, long_session(turns, output_chars, preamble_chars))
