"""Rollout outcomes on a real docker engine (#25): `pytest -m docker tests/test_outcome_docker.py`.

The toy SWE-bench instance (tests/collect_toy.py) is played by a scripted student behind a vLLM-like
server: a command that fails (exit code 1) then the fix, and a garbled call (the agent's own
`unparsed_tool_call`) then the fix. The swebench harness grades; the states carry each call's exit
code, the agent's error, the reward and the exit status; a failed state names its recovery.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ingestion.store import load_states
from tests.collect_toy import (
    FIX,
    GARBLED,
    NAMESPACE,
    VLLM_SCRIPTS,
    ensure_instance_images,
    toy_instance,
    toy_policy,
)
from tests.vllm_server import VLLMConfig, VLLMServer

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[1]
FAILING = [[{"name": "bash", "arguments": {"command": "python3 -c 'import no_such_module'"}}], *FIX]
IDS = ["toy__calc-25", "toy__calc-26"]


def test_rollout_states_carry_exit_codes_reward_and_recovery(tmp_path: Path, client: Any) -> None:
    tag = ensure_instance_images(client, IDS)
    instances = tmp_path / "instances.jsonl"
    rows = [toy_instance(IDS[0], "failing"), toy_instance(IDS[1], "garbled")]
    instances.write_text("".join(json.dumps(row) + "\n" for row in rows))
    policy = toy_policy(scripts={**VLLM_SCRIPTS, "failing": FAILING, "garbled": GARBLED})
    with VLLMServer(policy, VLLMConfig(version="0.33", max_model_len=4000)) as server:
        done = subprocess.run([sys.executable, "-m", "collect.run", "--instances", str(instances),
                               "--student-url", server.url, "--student-model", "student",
                               "--out", str(tmp_path / "out"), "--namespace", NAMESPACE, "--image-tag", tag,
                               "--evaluate"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    from replay.run import main

    out = tmp_path / "states"
    assert main(["--source", str(tmp_path / "out"), "--out", str(out), "--dry-run"]) == 0
    states = {(s.metadata["instance_id"], s.turn): s for s in load_states(out)}
    failing = [states[IDS[0], turn].metadata["outcome"] for turn in range(5)]
    assert [o["kind"] for o in failing] == ["error", "ok", "ok", "ok", "ok"]
    assert failing[0]["calls"][0]["exit_code"] == 1 and "no_such_module" in failing[0]["calls"][0]["error"]
    assert [failing[t]["calls"][0]["exit_code"] for t in (1, 3)] == [0, 0] and failing[4]["calls"] == []
    assert all(o["reward"] == 1.0 and o["exit_status"] == "submitted" for o in failing)
    assert states[IDS[0], 0].metadata["recovery"] == states[IDS[0], 1].state_id
    garbled = states[IDS[1], 0].metadata["outcome"]
    assert (garbled["kind"], garbled["agent_error"], garbled["calls"]) == ("error", "unparsed_tool_call", [])
    assert states[IDS[1], 0].metadata["recovery"] == states[IDS[1], 1].state_id
    report = json.loads((out / "report.json").read_text())
    assert report["outcomes"] == {"error": 2, "ok": len(states) - 2}
