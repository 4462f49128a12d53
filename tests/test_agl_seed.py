"""The seed example's outputs as a source (issue #49): agent-lightning 0.3.0 itself (its own venv,
tests/agl_venvs.py) records three rollouts of the project's collect/ agent through its LLMProxy in front
of the vLLM-shaped stand-in, and they are written as the seed example writes them (`stream_<id>.json`,
beside a `dataset-<id>/` folder of its columns); `replay.run` reads them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replay.run import main
from tests.agl_rollouts import MODEL, ROLLOUTS, Made, expected_body, seed_streams
from tests.agl_venvs import Unavailable, python_of
from tests.cli import pool
from tests.llm_server import LLMServer, Reply, chat_completion

CALLS = 8            # fix: 4, nofix: 3, fails: 1 answered (+ 1 refused)


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Made]:
    try:
        python = python_of("0.3.0")
    except Unavailable as why:
        pytest.skip(f"agentlightning 0.3.0 cannot be installed here: {why}")
    folder = tmp_path_factory.mktemp("seed") / "data_debug"
    made = seed_streams(python, folder)
    _seed_datasets(folder)
    return folder, made


def _seed_datasets(folder: Path) -> None:
    """A `dataset-<id>/` beside each stream, with the seed example's columns (its vLLM mode)."""
    from datasets import Dataset

    for stream in folder.glob("stream_*.json"):
        instance = stream.name[len("stream_"):-len(".json")]
        rows = [{"repo": "toy/calc", "instance_id": instance, "turn": 1, "prompt_ids": [1, 2],
                 "gold_completion_ids": [3], "logprobs": [-0.5], "reward": 0.0, "prompt": "p",
                 "messages": [{"role": "user", "content": "u"}]}]
        Dataset.from_list(rows).save_to_disk(str(folder / f"dataset-{instance}"))


def teacher(body: dict[str, Any]) -> Reply:
    """Every teacher runs the tests, with the agent's own bash tool."""
    call = {"name": "bash", "arguments": {"command": "python -m pytest -q"}}
    return Reply(chat_completion(tool_calls=[call], model=body.get("model", "")))


def run(source: Path, out: Path, *extra: str) -> dict[str, Any]:
    assert main(["--source", str(source), "--out", str(out), "--cache", str(out.parent / "cache.sqlite"),
                 *extra]) == 0
    return json.loads((out / "report.json").read_text())


def states(out: Path) -> list[dict[str, Any]]:
    from ingestion.store import load_states

    return [state.model_dump() for state in load_states(out)]


def test_the_span_streams_are_written_as_the_seed_example_writes_them(seed: tuple[Path, Made]) -> None:
    folder, made = seed
    assert sorted(p.name for p in folder.glob("stream_*.json")) == [f"stream_{i}.json" for i in ROLLOUTS]
    assert len(made.requests) == CALLS and made.refused == 1
    for stream in folder.glob("stream_*.json"):
        spans = [json.loads(line) for line in stream.read_text().splitlines()]
        assert all(len(span) == 16 for span in spans)    # Span.model_dump(): 16 keys
        assert sum(span["name"] == "agentlightning.annotation" for span in spans) == 1


def test_one_state_per_call_with_the_token_ids_the_stand_in_returned(seed: tuple[Path, Made],
                                                                     tmp_path: Path) -> None:
    folder, made = seed
    report = run(folder, tmp_path / "out", "--dry-run")
    assert report["formats"] == {"agl_spans": {"files": 3, "states": CALLS}}
    assert report["states"] == CALLS and report["traces"] == 3
    assert report["skipped_turns"] == {"agl_failed_call": 1}           # the refused call: no state
    # read from the spans instead (each folder's state.json is a side file, as for any saved dataset)
    assert report["skipped_files"] == {"agl_seed_dataset": 3, "dataset_side_file": 3}
    read = states(tmp_path / "out")
    by_rollout = {made.rollout_ids[i]: i for i in ROLLOUTS}
    read.sort(key=lambda s: (list(by_rollout).index(s["trace_id"]), s["turn"]))
    matched = 0
    for state, request in zip(read, made.requests, strict=True):
        body = expected_body(request)
        choice = body["choices"][0]
        assert state["metadata"]["prompt_token_ids"] == body["prompt_token_ids"]
        assert state["metadata"]["completion_token_ids"] == choice["token_ids"]
        assert state["metadata"]["logprobs"] == [t["logprob"] for t in choice["logprobs"]["content"]]
        assert state["messages"][-1]["content"] == request["messages"][-1]["content"]
        matched += 1
    assert matched == CALLS
    for state in read:
        instance = by_rollout[state["trace_id"]]
        assert state["source"] == "agl_spans" and state["student_model"] == MODEL
        assert state["metadata"]["reward"] == ROLLOUTS[instance][1]
        assert state["metadata"]["outcome"]["reward"] == ROLLOUTS[instance][1]
        (event,) = state["metadata"]["events"]                       # the driver's emit_message
        assert event["name"] == "agentlightning.message"
        assert event["attributes"]["agentlightning.message.body"] == "graded by the toy harness"
        assert state["tools"] and {t["function"]["name"] for t in state["tools"]} == {"bash", "edit"}
    fix = [s for s in read if by_rollout[s["trace_id"]] == "toy__calc-1"]
    assert [c["name"] for s in fix for c in s["student_action"]["tool_calls"]] == ["bash", "edit", "bash"]


def test_pairs_from_loopback_teachers_unverifiable_by_the_environment(seed: tuple[Path, Made],
                                                                      tmp_path: Path) -> None:
    folder, _made = seed
    with LLMServer(teacher) as server:
        report = run(folder, tmp_path / "out", "--teachers",
                     pool(server.url, "deepseek-chat", "gpt-5") + f",qwen=openai/qwen3-coder@{server.url}")
    assert report["excluded_same_family"] == {"qwen": CALLS}     # the served model is Qwen's
    assert report["pairs"] == CALLS and report["states_failed"] == 0
    from datasets import load_from_disk

    rows = load_from_disk(str(tmp_path / "out" / "dataset"))
    rows = rows["train"] if hasattr(rows, "keys") else rows
    assert set(rows["source"]) == {"agl_spans"} and len(rows) == CALLS
    # The environment cannot judge them: no SWE-bench container was recorded, only the calls.
    from replay.verify import main as verify

    (tmp_path / "no-rollouts").mkdir()
    assert verify(["--run", str(tmp_path / "out"), "--rollouts", str(tmp_path / "no-rollouts")]) == 0
    checked = json.loads((tmp_path / "out" / "report.json").read_text())["verify"]
    assert checked["unverifiable_reasons"] == {"no_environment": CALLS} and checked["verified"] == 0


def test_a_stream_cut_short_and_a_provider_never_seen(seed: tuple[Path, Made], tmp_path: Path) -> None:
    folder, _made = seed
    source = tmp_path / "source"
    source.mkdir()
    whole = (folder / "stream_toy__calc-1.json").read_bytes()
    lines = whole.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"raw_gen_ai_request"' in line and i > 20)
    (source / "stream_cut.json").write_bytes(b"".join(lines[:cut]) + lines[cut][: len(lines[cut]) // 2])
    (source / "stream_acme.json").write_bytes(
        (folder / "stream_toy__calc-2.json").read_bytes().replace(b'"llm.hosted_vllm.', b'"llm.acme_llm.'))
    unknown = [json.loads(line) for line in (folder / "stream_toy__calc-3.json").read_text().splitlines()]
    for span in unknown:
        span["attributes"] = {k: v for k, v in span["attributes"].items() if not k.startswith("llm.")}
    (source / "stream_bare.json").write_text("".join(json.dumps(span) + "\n" for span in unknown))
    report = run(source, tmp_path / "out", "--dry-run")
    assert report["formats"]["agl_spans"]["files"] == 3
    assert sum(report["skipped_lines"].values()) == 1           # the half-written line
    assert report["skipped_turns"]["agl_span_without_request"] == 1
    assert report["skipped_traces"] == {"agl_no_calls": 1}
    read = states(tmp_path / "out")
    acme = [s for s in read if s["metadata"]["provider"] == "acme_llm"]
    assert len(acme) == 3 and all(s["metadata"]["completion_token_ids"] for s in acme)
    assert 0 < len(read) - len(acme) < 4                          # the calls before the cut
