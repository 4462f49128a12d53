"""`collect.run --agent claude-code --ray --samples` on a real Ray cluster on this machine (`-m docker`).

ray.cluster_utils.Cluster: a head that runs nothing and three worker nodes (one CPU and one `docker`
each), all on 127.0.0.1 and all driving the local docker engine. The pinned Claude Code CLI comes from
the cache CI fills (`python -m collect.claude_code_cli fetch`); every node finds it there. A vLLM-shaped
student on loopback (tests/vllm_server.py: real token ids and logprobs) plays the sessions; each first
waits a little in its container, so a node can be lost while it holds one. Without the CLI every test
here is skipped, saying why.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.collect_toy import ensure_instance_images, toy_instance
from tests.ray_cluster import NODE_ARGS, node_containers, ray_cluster
from tests.test_claude_code_agent_docker import ROOT, cli, command, leftovers, lines  # noqa: F401 (a fixture)
from tests.vllm_server import VLLMConfig, VLLMServer, assistant_text

pytestmark = pytest.mark.docker
IDS = ["toy__calc-31", "toy__calc-32", "toy__calc-33"]
SAMPLES, WORKERS = 2, 3
WAIT = "python3 -c 'import time; time.sleep(5)' && echo steady"
STEADY = [
    [{"name": "Bash", "arguments": {"command": WAIT, "description": "Wait for the build"}}],
    [{"name": "Read", "arguments": {"file_path": "/testbed/calc.py"}}],
    [{"name": "Edit", "arguments": {"file_path": "/testbed/calc.py",
                                    "old_string": "def add(a, b):\n    return a - b",
                                    "new_string": "def add(a, b):\n    return a + b"}}],
    "add() subtracted; it adds now.",
]
# What differs between two runs of the same rollouts: times, and the ids the CLI, the proxy, the server
# and the run draw at random (the run's id names its network and its rollouts).
TIMING = {"created_at", "started_at", "elapsed_s", "latency_s", "timestamp", "duration_ms",
          "duration_api_ms", "id", "message_id", "request_id", "requestId", "uuid", "parentUuid",
          "sessionId", "session_id", "leafUuid", "promptId", "messageId"}
RANDOM = [(re.compile(r"collect-\d{8}T\d{6}-[0-9a-f]{6}(\.claude-code)?(\.[0-9a-f]{8})?"), "RUN"),
          (re.compile(r"chatcmpl-(tool-)?[0-9a-f]{16,32}"), "chatcmpl-ID"),
          (re.compile(r"(msg|req)_[0-9a-f]{24}"), r"\1_ID"),
          (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "UUID")]


def policy(request: dict[str, Any]) -> str:
    """The student as the model behind the vLLM-shaped server: the raw text it writes, thinking first."""
    if not request.get("tools"):
        return "Toy session"                                    # the CLI's side requests (a title)
    text = json.dumps(request.get("messages") or [])
    if "connectivity check" in text:                            # the start-up probe
        return assistant_text("", [{"name": "bash", "arguments": {"command": "echo ready"}}])
    turn = sum(message.get("role") == "assistant" for message in request["messages"])
    step = STEADY[turn] if turn < len(STEADY) else "done"
    if isinstance(step, str):
        return assistant_text(step, reasoning=f"Turn {turn}.")
    return assistant_text("", step, reasoning=f"Turn {turn}.")


@pytest.fixture(scope="module")
def cluster() -> Any:
    yield from ray_cluster(WORKERS)


@pytest.fixture(scope="module")
def image_tag(client: Any) -> str:
    return ensure_instance_images(client, IDS)


def normalised(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: normalised(item) for key, item in value.items() if key not in TIMING}
    if isinstance(value, list):
        return [normalised(item) for item in value]
    if isinstance(value, str):
        for pattern, replacement in RANDOM:
            value = pattern.sub(replacement, value)
    return value


def folder_view(folder: Path) -> dict[str, Any]:
    """A rollout folder as two runs of it agree, times and random ids aside: our files (the rollout, the
    proxy's records, the prompt, the CLI's stderr), the session's conversation, how the CLI ended. The
    CLI's own bookkeeping (its machine id, timings, backups named by the clock, the order in which it
    writes its request digests) differs from one session to the next, on any machine."""
    view: dict[str, Any] = {name: normalised(lines(folder / name))
                            for name in ("rollout.jsonl", "proxy.jsonl")}
    view.update({name: (folder / name).read_text() for name in ("prompt.md", "stderr.txt")})
    result = json.loads((folder / "result.json").read_text())
    view["result.json"] = {key: result.get(key) for key in ("subtype", "is_error", "num_turns", "result")}
    sessions = sorted((folder / "claude/projects").rglob("*.jsonl"))
    view["sessions"] = {normalised(path.relative_to(folder).as_posix()): normalised(
        [[r["type"], r["message"]] for r in lines(path) if r.get("type") in ("user", "assistant")])
        for path in sessions}
    return view


def start(tmp_path: Path, rows: list[Any], url: str, tag: str, out: str, *extra: str) -> subprocess.Popen:
    argv = command(tmp_path, rows, url, tag, "--samples", str(SAMPLES), "--seed", "7", "--temperature", "0.7",
                   "--evaluate", *extra)
    argv[argv.index("--out") + 1] = str(tmp_path / out)
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen, out: Path) -> tuple[dict, str]:
    """The run's report.json, and what it printed (the progress bar, the summary)."""
    stdout, stderr = process.communicate(timeout=900)
    assert process.returncode == 0, stderr
    return json.loads((out / "report.json").read_text()), stdout + stderr


def test_samples_on_a_cluster_survive_a_lost_node_equal_a_local_run_and_resume(
        tmp_path: Path, client: Any, cli: Path, cluster: Any, image_tag: str) -> None:  # noqa: F811
    rows = [toy_instance(instance_id, "steady") for instance_id in IDS]
    pairs = [(instance_id, sample) for instance_id in IDS for sample in range(SAMPLES)]
    folders = sorted(f"{i}.s{k}" if k else i for i, k in pairs)
    with VLLMServer(policy, VLLMConfig(max_model_len=1_000_000)) as server:
        driver = start(tmp_path, rows, server.url, image_tag, "ray", "--ray", cluster.address)
        deadline, busy = time.monotonic() + 300, {}
        while len(set(busy.values())) < WORKERS and time.monotonic() < deadline and driver.poll() is None:
            busy = node_containers(client)
            time.sleep(0.2)
        assert len(set(busy.values())) == WORKERS, "every worker node holds a rollout"
        lost = next(node for node in cluster.worker_nodes
                    if node.node_id[:8] == next(iter(busy.values())).rsplit("/", 1)[1])
        cluster.remove_node(lost, allow_graceful=False)         # mid-session: its container is still up
        report, printed = finish(driver, tmp_path / "ray")
        (tmp_path / "first-report.json").write_text(json.dumps(report))   # the rerun replaces report.json
        seeds = {request.get("seed") for request in server.requests if request.get("tools")}

        assert report["ray"]["nodes"] == WORKERS and report["ray"]["nodes_lost"] == 1
        assert set(report["ray"]["claude_code_cli"].values()) == {"copied"}    # each node's cached CLI
        assert [(o["instance_id"], o["sample"]) for o in report["outcomes"]] == pairs   # each done once
        assert (report["rollouts"], report["ok"], report["resolved"], report["started"]) == (6, 6, 6, 6)
        assert report["turns"] == report["turns_with_token_ids"] == 6 * len(STEADY)
        assert sum(n["rollouts"] for n in report["nodes"].values()) == 6
        bar = re.findall(r"(127\.0\.0\.1/[0-9a-f]{8})=(\d+)", printed)  # the progress bar's last line
        assert dict(bar) == {node: str(n["rollouts"]) for node, n in report["nodes"].items()}
        assert report["nodes"].get(f"127.0.0.1/{lost.node_id[:8]}", {"rollouts": 0})["rollouts"] < 6
        assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == sorted([*folders, "report.json"])
        assert leftovers(client) == []                          # containers and networks, the lost node's too

        headers = {}
        for instance_id, sample in pairs:
            folder = tmp_path / "ray" / (f"{instance_id}.s{sample}" if sample else instance_id)
            header, final = lines(folder / "rollout.jsonl")
            assert (header["instance_id"], header["sample"], final["resolved"]) == (instance_id, sample, True)
            assert header["sampling"]["temperature"] == 0.7 and header["answer_key"]["ok"] is True
            # the node's network of the run: internal, its gateway (the task's proxy) the only way out
            assert re.fullmatch(r"collect-[\w-]+\.claude-code\.[0-9a-f]{8}", header["answer_key"]["network"])
            assert header["answer_key"]["internal"] is True
            headers[instance_id, sample] = header
            main = [r for r in lines(folder / "proxy.jsonl") if r["role"] == "main"]
            assert len(main) == len(STEADY)
            assert all(r["request"]["seed"] == header["sampling"]["seed"] for r in main)
            assert all(r["prompt_token_ids"] and r["completion_token_ids"] for r in main)
            assert all(len(r["logprobs"]) == len(r["completion_token_ids"]) for r in main)
        assert len({h["rollout_id"] for h in headers.values()}) == 6
        assert len({h["sampling"]["seed"] for h in headers.values()}) == 6 == len(seeds - {None})

        local = subprocess.run(command(tmp_path, rows, server.url, image_tag, "--samples", str(SAMPLES),
                                       "--seed", "7", "--temperature", "0.7", "--evaluate", "--workers", "2"),
                               cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert local.returncode == 0, local.stderr
        for name in folders:
            assert folder_view(tmp_path / "ray" / name) == folder_view(tmp_path / "out" / name), name

        written = {p: p.read_bytes() for p in (tmp_path / "ray").rglob("*") if p.is_file()
                   and p.name != "report.json"}
        again, _ = finish(start(tmp_path, rows, server.url, image_tag, "ray", "--ray", cluster.address),
                          tmp_path / "ray")
    assert (again["started"], again["resumed"], again["rollouts"], again["resolved"]) == (0, 6, 6, 6)
    assert again["turns_with_token_ids"] == 6 * len(STEADY)
    assert written == {p: p.read_bytes() for p in (tmp_path / "ray").rglob("*") if p.is_file()
                       and p.name != "report.json"}
    assert leftovers(client) == []
    cluster.add_node(**NODE_ARGS)                               # for the next test
    cluster.wait_for_nodes()
