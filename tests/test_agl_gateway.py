"""agent-lightning 1.0's Gateway as a source (issue #49): the real Gateway (1.0.2, `agl-server`, its own
venv on this Python 3.11: tests/agl_venvs.py) on 127.0.0.1, the vLLM-shaped stand-in registered as its
model endpoint, the project's collect/ agent run through its proxy. `replay.run --source agl+http://…`
reads it live; a saved export of the same rollouts gives byte-identical states.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestion.store import load_states
from replay.run import main
from tests.agl_rollouts import MODEL, ROLLOUTS, Made, expected_body, free_port, gateway, gateway_rollouts
from tests.agl_venvs import Unavailable, python_of

ROOT = Path(__file__).resolve().parents[1]
CALLS = 8


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Made]]:
    try:
        python = python_of("1.0.2")
    except Unavailable as why:
        pytest.skip(f"agentlightning 1.0.2 cannot be installed here: {why}")
    with gateway(python) as url:
        yield url, gateway_rollouts(url, tmp_path_factory.mktemp("agent"))


def dry_run(source: str, out: Path) -> dict[str, Any]:
    assert main(["--source", source, "--out", str(out), "--dry-run"]) == 0
    return json.loads((out / "report.json").read_text())


def export(url: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ingestion.agent_lightning.export", "--gateway", url,
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_live_gateway_gives_one_state_per_call(live: tuple[str, Made], tmp_path: Path) -> None:
    url, made = live
    report = dry_run(f"agl+{url}", tmp_path / "out")
    assert report["formats"] == {"agl_gateway": {"files": 1, "states": CALLS}}
    assert report["traces"] == 3 and report["states"] == CALLS
    assert report["skipped_turns"] == {"agl_failed_call": 1, "agl_completions_call": 1}
    # the rollout without a call; fix's crashed attempt, which the events route does not serve
    assert report["skipped_traces"] == {"agl_other_attempt": 1, "agl_no_calls": 1}
    states = sorted((s.model_dump() for s in load_states(tmp_path / "out")),
                    key=lambda s: (list(ROLLOUTS).index(s["trace_id"][3:]), s["turn"]))
    for state, request in zip(states, made.requests, strict=True):
        body = expected_body(request)
        assert state["metadata"]["prompt_token_ids"] == body["prompt_token_ids"]
        assert state["metadata"]["completion_token_ids"] == body["choices"][0]["token_ids"]
        logprobs = body["choices"][0]["logprobs"]["content"]
        assert state["metadata"]["logprobs"] == [t["logprob"] for t in logprobs]
    for state in states:
        instance = state["trace_id"][3:]
        assert state["source"] == "agl_gateway" and state["student_model"] == MODEL
        assert state["metadata"]["reward"] == ROLLOUTS[instance][1]
        assert state["metadata"]["exit_status"] == "succeeded" and state["metadata"]["mode"] == "train"
        assert state["metadata"]["events"] == [{"event_type": "swebench_eval",
                                                "data": {"resolved": ROLLOUTS[instance][1] == 1.0}}]
        # the agent's tool_choice, and the temperature the Gateway sets for train-mode calls
        assert state["metadata"]["sampling"] == {"tool_choice": "auto", "temperature": 1.0}


def test_a_saved_export_gives_byte_identical_states(live: tuple[str, Made], tmp_path: Path) -> None:
    url, _made = live
    done = export(url, tmp_path / "saved" / "rollouts.agl.jsonl")
    assert done.returncode == 0, done.stderr
    dry_run(f"agl+{url}", tmp_path / "live")
    report = dry_run(str(tmp_path / "saved"), tmp_path / "export")
    assert report["formats"] == {"agl_gateway": {"files": 1, "states": CALLS}}
    for name in ("states.jsonl", "traces.jsonl"):
        assert (tmp_path / "live" / name).read_bytes() == (tmp_path / "export" / name).read_bytes()


def test_an_export_cut_short_keeps_the_rollouts_before_the_cut(live: tuple[str, Made],
                                                               tmp_path: Path) -> None:
    url, _made = live
    assert export(url, tmp_path / "whole.agl.jsonl").returncode == 0
    lines = (tmp_path / "whole.agl.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "rollouts.agl.jsonl").write_bytes(b"".join(lines[:3]) + lines[3][:100])
    report = dry_run(str(tmp_path / "cut"), tmp_path / "out")
    assert report["states"] == 4 + 3                       # the first two rollouts, whole
    assert report["repaired_lines"] == {"agl_export_cut_short": 1}
    assert report["skipped_lines"] == {"truncated_line": 1}   # the half-written rollout
    assert report["skipped_records"] == {}                     # and no record read out of it (#55)


def test_an_unreachable_gateway_is_one_line_and_exit_2(tmp_path: Path) -> None:
    closed = f"agl+http://127.0.0.1:{free_port()}"
    for args in (["-m", "replay.run", "--source", closed, "--out", str(tmp_path / "out"), "--dry-run"],
                 ["-m", "ingestion.agent_lightning.export", "--gateway", closed,
                  "--out", str(tmp_path / "x")]):
        done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and "does not answer" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
