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
from typing import Any

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
    summaries = [s for s in states if SUMMARY in str(s.messages[1]["content"])]
    assert summaries and all(len(s.messages) < 10 for s in summaries)          # context cut at compaction
    # CLI 2.1.330 sends the summary, then the last turn it kept verbatim (the Glob call and its result)
    assert conversation(summaries[0].messages) == ["summary", "call:toolu_ex_long-compact_1_0",
                                                   "result:toolu_ex_long-compact_1_0"]


SUMMARY = "This session is being continued"


def conversation(messages: list[dict[str, Any]]) -> list[str]:
    """OpenAI messages (a state's) or Anthropic ones (a request's) as the summary, calls and results."""
    out: list[str] = []
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if message.get("role") == "tool":
            out.append(f"result:{message['tool_call_id']}")
        for block in blocks:
            if block.get("type") == "text" and block.get("text", "").startswith(SUMMARY):
                out.append("summary")
            elif block.get("type") in ("tool_use", "tool_result"):
                out.append(f"{'call' if block['type'] == 'tool_use' else 'result'}:"
                           f"{block.get('id') or block.get('tool_use_id')}")
        out += [f"call:{call['id']}" for call in message.get("tool_calls") or ()]
    return out


def test_post_compaction_states_hold_what_the_cli_sent(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The ground truth is the real CLI's own request after it compacts: the summary, then the messages
    # it kept verbatim, then what followed. Each state's history must be that request's conversation.
    binary = cached_binary(load_claude_code_spec())
    if not binary.is_file():
        pytest.skip(f"the pinned Claude Code CLI is not cached at {binary} "
                    "(python -m collect.claude_code_cli fetch)")
    sys.path.insert(0, str(ROOT / "examples"))
    import make_sessions

    requests: list[dict[str, Any]] = []
    answer = make_sessions.answer

    def recorded(request: dict[str, Any], cwd: Path, log: list[dict[str, Any]]) -> dict[str, Any]:
        reply = answer(request, cwd, log)
        requests.append({"request": request, "reply": reply["id"]})
        return reply

    monkeypatch.setattr(make_sessions, "answer", recorded)
    make_sessions.run_session(binary, "long-compact", tmp_path / "work", None)
    states = ingest(tmp_path / "work" / "home" / ".claude" / "projects")
    sent = {r["reply"]: conversation(r["request"]["messages"]) for r in requests}
    after = [s for s in states if SUMMARY in str(s.messages[1]["content"])]
    assert len(after) >= 3 and all("call:toolu_ex_long-compact_1_0" in sent[s.metadata["message_id"]]
                                   for s in after)
    for state in states:
        assert conversation(state.messages) == sent[state.metadata["message_id"]], state.state_id


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
