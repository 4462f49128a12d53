"""No answer key in the rollout container (collect/answer_key.py), on a real docker engine (`-m docker`).

The toy image here holds the fix past HEAD the way SWE-bench's eval images once did (a branch, a tag, a
remote ref, a stash, the reflog, ORIG_HEAD). A scripted student looks for it with every command of
mini-swe-agent #787, finds nothing, then fixes the bug itself; the harness still grades the patch.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from collect.instances import image_name
from collect.runtime import LABEL
from ingestion.rollouts import iter_rollout_states
from ingestion.stats import IngestStats
from tests.collect_toy import (
    FIX,
    NAMESPACE,
    VLLM_SCRIPTS,
    ensure_instance_images,
    toy_instance,
    toy_policy,
    vllm_body,
)
from tests.test_collect_docker import ROOT, collect, leftovers, records
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


@pytest.fixture(scope="module")
def cli() -> Path:
    from collect.claude_code_cli import cached_binary, fetch_binary, load_claude_code_spec
    from collect.config import CollectError

    spec = load_claude_code_spec()
    try:
        return fetch_binary(spec)
    except (CollectError, OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"the Claude Code CLI is not available ({exc}); it would be at {cached_binary(spec)}")


def test_claude_code_finds_no_answer_key_either(tmp_path: Path, client: Any, cli: Path) -> None:
    from tests.llm_server import Reply, chat_completion
    from tests.test_claude_code_agent_docker import CLAUDE_SCRIPTS, lines, session_file
    from tests.test_claude_code_agent_docker import command as claude_command

    tag = ensure_instance_images(client, [ID], future=True)
    fix = in_image(client, image_name(ID, NAMESPACE, tag), "git rev-parse v-fix").strip()
    looks = [[{"name": "Bash", "arguments": {"command": look.format(fix=fix), "description": "Look"}}]
             for look in LOOKS]
    script = [*looks, *CLAUDE_SCRIPTS["fix"]]

    def student(request: dict[str, Any]) -> Reply:
        if not request.get("tools"):                     # the CLI's side requests: a title
            return Reply(chat_completion("Toy session", model="student"))
        turn = sum(message.get("role") == "assistant" for message in request.get("messages") or [])
        step = script[turn] if turn < len(script) else "done"
        return Reply(vllm_body(step, turn, with_tokens=bool(request.get("return_token_ids"))))

    with VLLMServer(toy_policy(), intercept=student) as server:
        argv = [*claude_command(tmp_path, [toy_instance(ID, "peek")], server.url, tag, "--evaluate"),
                "--max-turns", "20", "--claude-binary", str(cli)]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    [outcome] = json.loads((tmp_path / "out/report.json").read_text())["outcomes"]
    assert (outcome["reward"], outcome["error_kind"]) == (1.0, None)
    header = lines(tmp_path / f"out/{ID}/rollout.jsonl")[0]
    check = header["answer_key"]
    assert check["ok"] is True and check["network"].endswith(".claude-code") and check["internal"] is True
    assert (check["refs"], check["reflog"], check["outside_head"], check["unreachable"]) == (1, 0, 0, 0)
    session = lines(session_file(tmp_path / f"out/{ID}"))
    results = [str(block["content"]) for r in session if r.get("type") == "user"
               and isinstance(r["message"]["content"], list)
               for block in r["message"]["content"] if block.get("type") == "tool_result"]
    assert len(results) >= len(LOOKS) + 3
    for output in results[:len(LOOKS)]:
        assert "answer key" not in output and "return a + b" not in output
    assert not any(fix[:7] in output for output in results[:3])
    assert leftovers(client) == []


def test_a_head_that_is_not_the_base_commit_ends_the_instance_before_the_agent(tmp_path: Path,
                                                                               client: Any) -> None:
    tag = ensure_instance_images(client, [ID], future=True)
    base = in_image(client, image_name(ID, NAMESPACE, tag), "git rev-parse HEAD~0").strip()
    row = {**toy_instance(ID, "fix"), "base_commit": base[:12]}
    with VLLMServer(toy_policy()) as server:
        code, report, stderr = collect(tmp_path, [row], server.url, tag)
        asked = len(server.requests)
    assert code == 0, stderr
    assert report["outcomes"][0]["error_kind"] is None                  # HEAD is the base: fine
    assert records(tmp_path / f"out/{ID}.rollout.jsonl")[0]["answer_key"]["at_base"] is True

    # the same image for a row naming another base: the checkout may be the future itself
    row = {**row, "base_commit": "0" * 40}
    (tmp_path / "again").mkdir()
    with VLLMServer(toy_policy()) as server:
        code, report, stderr = collect(tmp_path / "again", [row], server.url, tag)
        assert len(server.requests) < asked                             # the probe only: no turn
    [outcome] = report["outcomes"]
    assert code == 1 and outcome["error_kind"] == "answer_key_visible" and outcome["rollout_file"] is None
    assert "HEAD is not the base commit" in outcome["error"]
    assert leftovers(client) == []
