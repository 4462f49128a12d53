"""No answer key in the rollout container (collect/answer_key.py), on a real docker engine (`-m docker`).

The toy image here holds the fix past HEAD the way SWE-bench's eval images once did (a branch, a tag, a
remote ref, a stash, the reflog, ORIG_HEAD). A scripted student looks for it with every command of
mini-swe-agent #787, finds nothing, then fixes the bug itself; the harness still grades the patch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from collect.instances import image_name
from collect.runtime import LABEL
from ingestion.rollouts import iter_rollout_states
from ingestion.stats import IngestStats
from tests.collect_toy import FIX, NAMESPACE, VLLM_SCRIPTS, ensure_instance_images, toy_instance, toy_policy
from tests.test_collect_docker import collect, leftovers, records
from tests.vllm_server import VLLMServer

pytestmark = pytest.mark.docker
ID = "toy__calc-7"
LOOKS = ["git log --all --oneline", "git reflog", "git tag", "git show {fix}", "git show {fix}:calc.py",
         "git stash list; git branch -a; git remote -v; cat .git/ORIG_HEAD; git cat-file -t {fix}"]


def in_image(client: Any, image: str, command: str) -> str:
    """A command in a plain container of the untouched image (labelled: the leftovers check sees it)."""
    output = client.containers.run(image, ["bash", "-c", command], remove=True, network_mode="none",
                                   labels={LABEL: "test-answer-key"})
    return output.decode()


def test_the_fix_is_unreachable_in_the_container_and_the_patch_still_grades(tmp_path: Path,
                                                                             client: Any) -> None:
    tag = ensure_instance_images(client, [ID], future=True)
    image = image_name(ID, NAMESPACE, tag)
    fix = in_image(client, image, "git rev-parse v-fix").strip()
    # the image itself holds the answer key: every route the student will try finds it there
    assert "fix add: the answer key" in in_image(client, image, "git log --all --oneline")
    assert fix in in_image(client, image, "git reflog; cat .git/ORIG_HEAD")
    assert "return a + b" in in_image(client, image, f"git show {fix}:calc.py")

    looks = [[{"name": "bash", "arguments": {"command": look.format(fix=fix)}}] for look in LOOKS]
    policy = toy_policy(scripts={**VLLM_SCRIPTS, "peek": [*looks, *FIX]})
    with VLLMServer(policy) as server:
        code, report, stderr = collect(tmp_path, [toy_instance(ID, "peek")], server.url, tag, "--evaluate",
                                       "--max-turns", "20")
    assert code == 0, stderr
    [outcome] = report["outcomes"]
    assert (outcome["reward"], outcome["resolved"], outcome["error_kind"]) == (1.0, True, None)

    rollout = records(tmp_path / f"out/{ID}.rollout.jsonl")
    check = rollout[0]["answer_key"]
    assert check["ok"] is True and check["removed_refs"] >= 4       # branch, tag, remote ref, stash
    assert {k: check[k] for k in ("refs", "reflog", "stash", "remotes", "outside_head", "unreachable",
                                  "network", "default_route")} == {
        "refs": 1, "reflog": 0, "stash": 0, "remotes": 0, "outside_head": 0, "unreachable": 0,
        "network": "none", "default_route": False}
    seen = [obs for turn in rollout[1:1 + len(LOOKS)] for obs in turn["observations"]]
    assert len(seen) == len(LOOKS)
    for observation in seen:
        assert "answer key" not in observation["output"] and "return a + b" not in observation["output"]
    assert not any(fix[:7] in observation["output"] for observation in seen[:3])
    assert seen[0]["output"].count("\n") == 1 and " base" in seen[0]["output"]   # the base commit alone
    assert seen[1]["exit_code"] == 0 and seen[2]["output"].strip() == "[exit code: 0]"
    assert seen[3]["exit_code"] == 128 and "bad object" in seen[3]["output"]
    assert seen[4]["exit_code"] == 128
    assert "+    return a + b" in rollout[-1]["patch"]        # the student's own fix, graded on the image

    stats = IngestStats()
    states = list(iter_rollout_states(tmp_path / f"out/{ID}.rollout.jsonl", stats))
    assert [s.metadata["inspects_history"] for s in states] == [True] * len(LOOKS) + [False] * len(FIX)
    assert stats.history["inspects_history"] == len(LOOKS)
    assert json.dumps(check)  # recorded as plain JSON
    assert leftovers(client) == []
