"""`--format dpo | kto | sft`: which judged states feed which rows, the columns each format keeps, the
card, and the training examples (LoRA, tiny model, 2 steps each).

States are built with the export tests' helpers; their `metadata["outcome"]` is set here, in the shape
of `ingestion/outcome.py`, as the readers fill it."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from consensus.vote import vote
from ingestion.outcome import call_outcome, turn_outcome
from ingestion.schema import TraceState
from replay.decide.states import settle
from replay.export.card import card_text
from replay.export.checks import check_rows
from replay.export.dataset import export_dataset
from replay.export.formats import COLUMNS, KEEP, format_counts, format_rows
from replay.export.pairs import PAIR_COLUMNS
from replay.options import ExportOptions
from replay.run import main
from tests.test_export import CWD, sample_cases, teachers, tool_action
from tests.tiny_model import build_tiny

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def with_outcome(state: TraceState, kind: str | None) -> TraceState:
    if kind is None:
        return state
    calls = [call_outcome(c.id, c.name, kind, "String to replace not found" if kind == "error" else None)
             for c in state.student_action.tool_calls]
    outcome = turn_outcome(calls, text_kind=None if calls else kind)
    return state.model_copy(update={"metadata": {**state.metadata, "outcome": outcome}})


def judged_cases() -> list[tuple[str, TraceState, list]]:
    """(name, state, proposals): pairs, an agreement and an abstention, with and without failures."""
    cases = sample_cases()
    pair_state, pair_props = cases[0]       # teachers read the test; the student deletes build/
    text_state, text_props = cases[1]       # teachers edit; the student answers in text
    agree = pair_state.model_copy(update={"state_id": "claude_code:t1:5", "turn": 5,
                                          "student_action": tool_action("Read", "toolu_5",
                                                                        file_path="tests/test_a.py")})
    split = teachers(tool_action("Bash", command="git log"), tool_action("Bash", command="ls src"),
                     tool_action("Read", file_path="README.md"))
    abstain = pair_state.model_copy(update={"state_id": "claude_code:t1:6", "turn": 6})
    return [
        ("pair_failed", with_outcome(pair_state, "error"), pair_props),
        ("pair_ok", with_outcome(text_state, "ok"), text_props),
        ("agree_ok", with_outcome(agree, "ok"), pair_props),
        ("agree_failed", with_outcome(agree.model_copy(update={"state_id": "claude_code:t1:7", "turn": 7}),
                                      "rejected"), pair_props),
        ("abstained_failed", with_outcome(abstain, "interrupted"), split),
        ("abstained_ok", with_outcome(abstain.model_copy(update={"state_id": "claude_code:t1:8", "turn": 8}),
                                      "ok"), split),
        ("pair_unknown", cases[2][0], cases[2][1]),   # no outcome recorded
    ]


def settled_rows(fmt: str) -> tuple[dict[str, str], list[dict]]:
    verdicts, rows = {}, []
    for name, state, proposals in judged_cases():
        settled = settle(state, proposals, vote(proposals, CWD), keep=KEEP[fmt])
        verdicts[name] = settled.verdict
        if settled.row is not None:
            rows.append(settled.row)
    return verdicts, rows


def by_state(rows: list[dict]) -> dict[str, list[tuple[str, bool | None]]]:
    out: dict[str, list] = {}
    for row in rows:
        out.setdefault(row["state_id"].rsplit(":", 1)[1], []).append((row.get("completion_from"),
                                                                       row.get("label")))
    return out


def test_the_cases_settle_as_named():
    verdicts, _ = settled_rows("kto")
    assert {name: verdict for name, verdict in verdicts.items()} == {
        "pair_failed": "pair", "pair_ok": "pair", "agree_ok": "agree", "agree_failed": "agree",
        "abstained_failed": "abstained", "abstained_ok": "abstained", "pair_unknown": "pair"}


def test_kto_rows_come_from_consensus_and_failed_student_actions():
    _, judged = settled_rows("kto")
    rows = format_rows(judged, "kto")
    assert all(tuple(row) == COLUMNS["kto"] for row in rows)
    # turn → rows: pair_failed 1, pair_ok 2, agree_ok 5, agree_failed 7 (none), abstained_failed 6,
    # abstained_ok 8 (none), pair_unknown 3 (no outcome: never undesirable).
    assert by_state(rows) == {"1": [("consensus", True), ("student", False)], "2": [("consensus", True)],
                              "5": [("consensus", True)], "6": [("student", False)],
                              "3": [("consensus", True)]}
    student = next(r for r in rows if r["completion_from"] == "student" and r["turn"] == 1)
    assert student["completion"][0]["tool_calls"][0]["function"]["arguments"] == {"command": "rm -rf build",
                                                                                  "timeout": 600}
    assert student["student_outcome"] == "error" and student["verdict"] == "pair"
    consensus = next(r for r in rows if r["completion_from"] == "consensus" and r["turn"] == 1)
    assert consensus["completion"][0]["tool_calls"][0]["function"]["name"] == "Read"
    assert {r["student_outcome"] for r in rows if r["turn"] == 3} == {None}
    counts = format_counts(judged, rows, "kto")
    assert counts == {"name": "kto", "trainer": "KTOTrainer", "rows": 6,
                      "from_verdicts": {"abstained": 1, "agree": 1, "pair": 4}, "desirable": 4,
                      "undesirable": 2, "agree_failed": 1}


def test_sft_rows_are_the_desirable_kto_rows_and_dpo_rows_the_pairs():
    _, judged = settled_rows("sft")
    sft = format_rows(judged, "sft")
    assert all(tuple(row) == COLUMNS["sft"] for row in sft)
    assert sorted(r["turn"] for r in sft) == [1, 2, 3, 5]
    _, kto_judged = settled_rows("kto")
    assert [r["completion"] for r in sft] == [r["completion"] for r in format_rows(kto_judged, "kto")
                                              if r["label"]]
    _, pairs = settled_rows("dpo")
    assert all(tuple(row) == PAIR_COLUMNS for row in pairs)  # no `verdict` in the default format
    assert [r["student_outcome"] for r in pairs] == ["error", "ok", None]
    assert format_rows(pairs, "dpo") == pairs


@pytest.mark.parametrize("fmt", ["dpo", "kto", "sft"])
def test_each_format_survives_arrow_with_tools_and_provenance(tmp_path, fmt):
    _, judged = settled_rows(fmt)
    rows = format_rows(judged, fmt)
    dataset = export_dataset(rows, tmp_path, fmt=fmt)
    assert tuple(dataset.column_names) == COLUMNS[fmt]
    assert dataset.to_list() == rows  # nothing merged, nothing null-filled, arguments stay objects
    assert dataset[0]["tools"][0]["function"]["name"] == "Bash"
    lines = [json.loads(line) for line in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert [line["state_id"] for line in lines] == [r["state_id"] for r in rows]
    if fmt == "kto":
        assert dataset.features["label"].dtype == "bool"
    empty = export_dataset([], tmp_path / "empty", fmt=fmt)
    assert tuple(empty.column_names) == COLUMNS[fmt] and empty.num_rows == 0


def test_checks_render_completion_rows(tmp_path):
    _, judged = settled_rows("kto")
    rows = format_rows(judged, "kto")
    kept, checks = check_rows(rows, ExportOptions(preflight_templates=["qwen3"], max_length=8192))
    assert len(kept) == len(rows) and checks["dropped"] == {}
    assert set(checks["lengths"]) == {"counted_with", "rows", "prompt", "completion", "total"}
    assert all(row["preflight"]["qwen3"] == [] for row in kept)
    assert checks["templates"]["qwen3"]["passed"] == len(rows)


@pytest.mark.parametrize(("fmt", "trainer"), [("dpo", "DPOTrainer"), ("kto", "KTOTrainer"),
                                               ("sft", "SFTTrainer")])
def test_the_card_names_the_format_and_its_trainer(fmt, trainer):
    text = card_text({"format": fmt, "pairs": 3, "rows": 5, "lengths": {
        "counted_with": "estimate", "rows": 5, "prompt": {"p50": 1}, "completion": {"p50": 2},
        "total": {"p50": 3}}})
    assert f"--format {fmt}" in text and f"from trl import {trainer[:3]}Config, {trainer}" in text
    assert f"examples/train_{fmt}.py" in text and f"- {fmt}\n" in text  # a tag
    assert ("| `completion` |" in text) == (fmt != "dpo") and "| completion | 2 |" in text
    if fmt == "kto":
        assert "undesirable" in text and "| `label` |" in text


def test_a_bad_format_is_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--source", ".", "--format", "orpo", "--dry-run"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def load_example(name: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.mark.parametrize("fmt", ["dpo", "kto", "sft"])
def test_the_training_example_runs_two_lora_steps(tmp_path, monkeypatch, tiny, fmt):
    import torch

    torch.manual_seed(0)
    _, judged = settled_rows(fmt)
    export_dataset(format_rows(judged, fmt), tmp_path / "out", fmt=fmt)
    example = load_example(f"train_{fmt}", monkeypatch)
    report = example.main(["--dataset", str(tmp_path / "out"), "--model", str(tiny), "--output",
                           str(tmp_path / "adapter"), "--max-steps", "2", "--max-length", "2048", "--cpu",
                           "--lora-r", "4"])
    assert report.steps == 2
    assert len(report.losses) == 2 and all(math.isfinite(loss) for loss in report.losses)
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()  # LoRA: an adapter, not a model


def test_an_example_refuses_another_format(tmp_path, monkeypatch, tiny):
    _, judged = settled_rows("dpo")
    export_dataset(judged, tmp_path / "out")
    example = load_example("train_sft", monkeypatch)
    with pytest.raises(SystemExit, match="is a --format dpo dataset; this trains --format sft"):
        example.main(["--dataset", str(tmp_path / "out"), "--model", str(tiny), "--cpu"])


def test_settle_keeps_only_pairs_by_default():
    state, proposals = sample_cases()[0]
    agree = state.model_copy(update={"student_action": tool_action("Read", file_path="tests/test_a.py")})
    assert settle(agree, proposals, vote(proposals, CWD)).row is None
    row = settle(agree, proposals, vote(proposals, CWD), keep=KEEP["sft"]).row
    assert row is not None and row["verdict"] == "agree" and row["chosen"]


def test_a_session_with_a_failed_call_gives_kto_rows_both_ways(tmp_path):
    """Through the CLI: a real session file whose tool result is `is_error`, three agreeing loopback
    teachers, --format kto: the consensus desirable on both turns, the failed call undesirable."""
    from functools import partial

    from datasets import load_from_disk

    from tests.llm_server import LLMServer
    from tests.sessions import assistant, text, tool_use, user, write_session
    from tests.teacher_script import scripted

    failing = [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                "content": "Exit code 1\nrm: cannot remove 'build': Permission denied"}]
    write_session(tmp_path / "src", [
        user("u1", None, "clean the build folder"),
        assistant("a1", "u1", "msg_1", tool_use("toolu_1", "rm -rf build")),
        user("u2", "a1", failing),
        assistant("a2", "u2", "msg_2", text("The build folder is gone.")),
    ])
    with LLMServer(partial(scripted, agreeing=("a", "b", "c"))) as server:
        teachers = ",".join(f"{n}=openai/{n}@{server.url}" for n in "abc")
        assert main(["--source", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--teachers",
                     teachers, "--cache", str(tmp_path / "cache.sqlite"), "--format", "kto"]) == 0
    rows = load_from_disk(str(tmp_path / "out" / "dataset")).to_list()
    assert [(r["turn"], r["label"], r["completion_from"], r["student_outcome"]) for r in rows] == [
        (0, True, "consensus", "error"), (0, False, "student", "error"), (1, True, "consensus", "ok")]
    call = rows[1]["completion"][0]["tool_calls"][0]["function"]
    assert call == {"name": "Bash", "arguments": {"command": "rm -rf build"}}
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["extra"]["format"]["undesirable"] == 1 and report["outcomes"]["error"] == 1
