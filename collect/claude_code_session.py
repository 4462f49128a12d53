"""One Claude Code session inside an instance container: install the CLI, run `claude -p`, copy it out.

In the container everything of ours lives in two places: the binary at /opt/teacher-replay/claude
(when copied in) and /tmp/teacher-replay/, which holds the prompt, the `--output-format json` result,
stderr, and the CLI's config dir (CLAUDE_CONFIG_DIR, so its `projects/` sessions and nothing from the
image's own ~/.claude). After the session /tmp/teacher-replay is copied out into the rollout folder.
"""

from __future__ import annotations

import json
import posixpath
import shlex
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from collect.claude_code_cli import tar_stream
from ingestion.rollout_format import ExitStatus

WORK = "/tmp/teacher-replay"
CONFIG_DIR = f"{WORK}/claude"          # copied out as <rollout folder>/claude: its projects/ hold the session
PROMPT, RESULT, STDERR = "prompt.md", "result.json", "stderr.txt"
BIN_DIR = "/opt/teacher-replay"
COPIED_BINARY = f"{BIN_DIR}/claude"
MAX_RESULT_BYTES = 8 * 1024 * 1024
SPOOL_BYTES = 64 * 1024 * 1024       # a session folder bigger than this is unpacked from disk


def session_env(fixed: dict[str, str], base_url: str, model: str, small_model: str,
                max_tokens: int | None, wait_s: float = 600.0) -> dict[str, str]:
    """The CLI's environment: the config's fixed part, the proxy, the model names it asks for, and how
    long it waits for an answer (`wait_s`: the proxy's own retries included, or the CLI gives up first).

    >>> env = session_env({"A": "1"}, "http://gw:1/k", "big", "small", None, wait_s=90)
    >>> env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_MODEL"], env["ANTHROPIC_SMALL_FAST_MODEL"], env["A"]
    ('http://gw:1/k', 'big', 'small', '1')
    >>> env["API_TIMEOUT_MS"]
    '90000'
    """
    env = {**fixed, "ANTHROPIC_BASE_URL": base_url, "CLAUDE_CONFIG_DIR": CONFIG_DIR,
           "API_TIMEOUT_MS": str(int(wait_s * 1000)),
           "ANTHROPIC_MODEL": model, "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
           "ANTHROPIC_DEFAULT_OPUS_MODEL": model, "ANTHROPIC_SMALL_FAST_MODEL": small_model,
           "ANTHROPIC_DEFAULT_HAIKU_MODEL": small_model}
    if max_tokens is not None:
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(max_tokens)
    return env


def session_argv(claude: str, max_turns: int, timeout: int) -> list[str]:
    """`claude -p` under a hard timeout, in a login shell (the image's profile: conda, PATH), prompt on stdin.

    >>> session_argv("claude", 3, 60)[:4]
    ['timeout', '-k', '10', '60']
    >>> session_argv("claude", 3, 60)[-1].split(" <")[0]
    'cd /testbed && claude -p --max-turns 3 --dangerously-skip-permissions --output-format json'
    """
    command = (f"cd /testbed && {shlex.quote(claude)} -p --max-turns {max_turns}"
               " --dangerously-skip-permissions --output-format json"
               f" < {WORK}/{PROMPT} > {WORK}/{RESULT} 2> {WORK}/{STDERR}")
    return ["timeout", "-k", "10", str(timeout), "bash", "-lc", command]


def session_outcome(exit_code: int | None, result: dict[str, Any] | None, stderr: str,
                    student_error: str | None, overflow: bool = False) -> tuple[ExitStatus, str | None]:
    """How the session ended, from the CLI's exit code, its JSON result and the proxy's last error
    (`overflow`: that error was a context overflow, the student's own end, graded as it stands).

    A session killed at the timeout ran out of budget like one that hit --max-turns: its patch is graded.

    >>> session_outcome(0, {"subtype": "success", "is_error": False}, "", None)
    ('submitted', None)
    >>> session_outcome(1, {"subtype": "error_max_turns", "is_error": True}, "", None)
    ('max_turns', None)
    >>> session_outcome(124, None, "", None)
    ('max_turns', None)
    >>> session_outcome(1, {"is_error": True, "api_error_status": 502, "result": "API Error"}, "", "down")
    ('student_error', 'down')
    >>> session_outcome(127, None, "claude: not found", None)
    ('runtime_error', 'claude exited with 127 and no result: claude: not found')
    >>> session_outcome(1, {"is_error": True, "api_error_status": 400}, "", "too long", overflow=True)
    ('context_overflow', 'too long')
    """
    if exit_code in (124, 137):                # GNU timeout: TERM sent / KILL after the grace period
        return "max_turns", None
    status, error = _outcome(exit_code, result, stderr, student_error)
    return ("context_overflow", error) if status == "student_error" and overflow else (status, error)


def _outcome(exit_code: int | None, result: dict[str, Any] | None, stderr: str,
             student_error: str | None) -> tuple[ExitStatus, str | None]:
    if result is None:
        if student_error:
            return "student_error", student_error
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        return "runtime_error", f"claude exited with {exit_code} and no result: {tail[0][:300]}"
    if result.get("subtype") == "error_max_turns":
        return "max_turns", None
    if result.get("is_error"):
        if result.get("api_error_status") or student_error:
            return "student_error", student_error or str(result.get("result"))[:500]
        return "runtime_error", f"claude failed: {str(result.get('result') or result.get('subtype'))[:300]}"
    return "submitted", None


def parse_result(data: bytes) -> dict[str, Any] | None:
    """The `--output-format json` result object; None if the CLI wrote none (or garbage).

    >>> parse_result(b'{"type": "result", "subtype": "success"}')["subtype"], parse_result(b"")
    ('success', None)
    """
    try:
        value = json.loads(data.decode("utf-8", errors="replace") or "null")
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def install_binary(container: Any, binary: Path) -> None:
    """Copy the host's CLI into the container, streamed (380 MB never sits in memory)."""
    if not container.put_archive(BIN_DIR, tar_stream(binary, posixpath.basename(COPIED_BINARY))):
        raise OSError(f"cannot copy {binary} into the container")


def extract_work(chunks: Iterable[bytes], folder: Path) -> list[str]:
    """Unpack the container's /tmp/teacher-replay (a tar from get_archive) into `folder`; the names kept.

    The archive's top folder is dropped, so `teacher-replay/claude/projects/...` lands in
    `folder/claude/projects/...`. tarfile's "data" filter refuses links and paths out of `folder`.
    """
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        for chunk in chunks:
            spool.write(chunk)
        spool.seek(0)
        with tarfile.open(fileobj=spool) as tar:
            kept = [name for member in tar.getmembers() if (name := _extract(tar, member, folder))]
    return kept


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, folder: Path) -> str | None:
    parts = member.name.split("/", 1)
    if len(parts) < 2 or not parts[1]:
        return None
    member.name = parts[1]
    tar.extract(member, folder, filter="data")
    return member.name


def read_head(path: Path, limit: int = MAX_RESULT_BYTES) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(limit)
    except OSError:
        return b""
