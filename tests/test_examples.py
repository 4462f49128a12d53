"""examples/sessions: the committed Claude Code sessions `make run` reads on a fresh clone.

They were made by the real CLI (examples/make_sessions.py); these tests check they hold what they are
for — tool calls, a parallel call, a subagent, a compaction — and, where the pinned CLI is cached, that
the script still makes sessions of the same shape.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from collect.claude_code_cli import cached_binary, load_claude_code_spec
from ingestion.options import IngestOptions
from ingestion.schema import TraceState
from ingestion.sources import iter_states
from ingestion.stats import IngestStats

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "sessions"


def ingest(root: Path, include_subagents: bool = True) -> list[TraceState]:
    return list(iter_states(root, IngestOptions(include_subagents=include_subagents), IngestStats()))


def shape(states: list[TraceState]) -> list[tuple[str, list[str]]]:
    """Per state: the session's project folder name (cwd's last part) and the student's tool calls."""
    return sorted((str(s.metadata.get("cwd", "")).rsplit("/", 1)[-1],
                   [call.name for call in s.student_action.tool_calls]) for s in states)


def test_the_examples_cover_tools_a_parallel_call_a_subagent_and_a_compaction() -> None:
    files = sorted(EXAMPLES.rglob("*.jsonl"))
    assert files and all(path.stat().st_size < 100_000 for path in files)
    states = ingest(EXAMPLES)
    main = ingest(EXAMPLES, include_subagents=False)
    assert len({s.trace_id for s in main}) == 3 and len({s.trace_id for s in states}) == 4
    assert {s.student_model for s in states} == {"claude-sonnet-4-6"}
    calls = Counter(call.name for s in states for call in s.student_action.tool_calls)
    assert {"Read", "Edit", "Bash", "Grep", "Glob", "Agent"} <= set(calls)
    assert any(len(s.student_action.tool_calls) == 2 for s in states)          # the parallel Reads
    assert any("/agent-" in s.trace_id for s in states)                        # the subagent's own trace
    summaries = [s for s in states if "This session is being continued" in str(s.messages[1]["content"])]
    assert summaries and all(len(s.messages) < 8 for s in summaries)           # context cut at compaction


def test_make_run_reads_the_examples_without_a_home_of_sessions(tmp_path: Path) -> None:
    done = subprocess.run(["make", "-s", "-n", "run", f"HOME={tmp_path}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--source examples/sessions " in done.stdout
    # Claude Code creates the folder before the first session: an empty one is no source (it made the
    # run exit 2), and the run says it falls back to the examples.
    (tmp_path / ".claude/projects/-repo").mkdir(parents=True)
    done = subprocess.run(["make", "-s", "-n", "run", f"HOME={tmp_path}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert "--source examples/sessions " in done.stdout and "No Claude Code session under" in done.stdout
    (tmp_path / ".claude/projects/-repo/s.jsonl").write_text("{}\n")
    done = subprocess.run(["make", "-s", "-n", "run", f"HOME={tmp_path}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert f"--source {tmp_path}/.claude/projects " in done.stdout and "No Claude Code" not in done.stdout


def test_the_script_makes_the_same_sessions_again(tmp_path: Path) -> None:
    binary = cached_binary(load_claude_code_spec())
    if not binary.is_file():
        pytest.skip(f"the pinned Claude Code CLI is not cached at {binary} "
                    "(python -m collect.claude_code_cli fetch)")
    done = subprocess.run([sys.executable, "examples/make_sessions.py", "--out", str(tmp_path / "out"),
                           "--workspace", str(tmp_path / "work"), "--claude-binary", str(binary)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert shape(ingest(tmp_path / "out")) == shape(ingest(EXAMPLES))
