"""End to end on CPU: pairs → export_dataset → load_from_disk → pre-flight → trl.DPOTrainer, 2 steps;
issue #17's acceptance on the shared fixtures' run at --max-length 8192; and issue #25's: the fixtures'
run in each --format trains 2 steps with its trainer (DPOTrainer, KTOTrainer, SFTTrainer), tools intact,
tool-call arguments rendered as objects.

The exported dataset goes into DPOTrainer as loaded, with no conversion: TRL 1.16 passes the `tools`
column and each message (tool calls included) straight to `apply_chat_template`.
"""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from replay.export.dataset import export_dataset
from replay.export.preflight import preflight
from replay.run import main
from tests.llm_server import LLMServer
from tests.teacher_script import scripted
from tests.test_export import pair_rows
from tests.tiny_model import build_four_chars_tiny, build_tiny


def test_dpo_trains_on_the_exported_dataset(tmp_path):
    import torch
    from datasets import load_from_disk
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    torch.manual_seed(0)
    tiny = build_tiny(tmp_path / "tiny")
    export_dataset(pair_rows(), tmp_path / "out")
    dataset = load_from_disk(str(tmp_path / "out" / "dataset"))
    tokenizer = AutoTokenizer.from_pretrained(str(tiny))

    # Tool arguments come back as objects and render as JSON objects in prompt, chosen and rejected.
    row = dataset[0]
    assert isinstance(row["tools"][0], dict)
    text = tokenizer.apply_chat_template(row["prompt"] + row["chosen"], tools=row["tools"], tokenize=False)
    assert '"arguments": {"command": "pytest -q", "description": "Run tests"}' in text
    assert '"arguments": {"file_path": "tests/test_a.py"}' in text
    assert '"arguments": {"command": "rm -rf build", "timeout": 600}' in tokenizer.apply_chat_template(
        row["prompt"] + row["rejected"], tools=row["tools"], tokenize=False)

    kept, dropped = preflight(dataset, str(tiny), max_length=2048)
    assert len(kept) == dataset.num_rows and not dropped

    args = DPOConfig(output_dir=str(tmp_path / "run"), bf16=False, use_cpu=True, max_steps=2,
                     per_device_train_batch_size=2, report_to=[], logging_steps=1, save_strategy="no",
                     max_length=2048, seed=0, disable_tqdm=True)
    trainer = DPOTrainer(model=AutoModelForCausalLM.from_pretrained(str(tiny)),
                         ref_model=AutoModelForCausalLM.from_pretrained(str(tiny)),
                         args=args, train_dataset=dataset, processing_class=tokenizer)
    output = trainer.train()

    assert trainer.state.global_step == 2
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    assert math.isfinite(output.training_loss)


# --- acceptance of issue #17: the shared fixtures' run at --max-length 8192 --------------------------------

TEMPLATES = ("qwen3", "llama3.1", "hermes", "gemma3")


def run_fixtures(fixtures_root: Path, root: Path, out: Path, *flags: str) -> dict[str, Any]:
    """`replay.run` over every shared fixture with three loopback teachers (two agree), --max-length 8192,
    the answers cached in `root`; returns the report."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        # One redaction key for every run over the fixtures (it lives in the user cache folder, which each
        # test gets its own of): the pseudonyms, the requests and the cached answers are then the same.
        env.setenv("XDG_CACHE_HOME", str(root / "xdg-cache"))
        with LLMServer(partial(scripted, agreeing=("a", "b"))) as server:
            teachers = ",".join(f"{n}=openai/{n}@{server.url}" for n in "abc")
            assert main(["--source", str(fixtures_root), "--out", str(out), "--teachers", teachers,
                         "--cache", str(root / "cache.sqlite"), "--max-length", "8192", *flags]) == 0
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def fixtures_run(tmp_path_factory: pytest.TempPathFactory, fixtures_root: Path) -> dict[str, Any]:
    """`replay.run` over every shared fixture with three loopback teachers, --max-length 8192 (the
    default 4-characters-per-token estimate), four real chat templates, a test split and a license."""
    root = tmp_path_factory.mktemp("fixtures_run")
    states = list(iter_states(fixtures_root, IngestOptions(max_length=8192), IngestStats()))
    tiny = build_four_chars_tiny(root / "tiny", states)
    report = run_fixtures(fixtures_root, root, root / "out", "--license", "mit",
                          "--preflight-template", ",".join(TEMPLATES), "--test-split", "0.2")
    return {"out": root / "out", "tiny": tiny, "root": root, "report": report}


def all_rows(out: Path) -> list[dict[str, Any]]:
    from datasets import concatenate_datasets, load_from_disk

    dataset = load_from_disk(str(out / "dataset"))
    return concatenate_datasets([dataset["train"], dataset["test"]]).to_list()


def test_fixtures_at_8192_survive_dpo_trainer_and_train(fixtures_run: dict[str, Any]) -> None:
    import torch
    from datasets import load_from_disk
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    report, out, tiny = fixtures_run["report"], fixtures_run["out"], fixtures_run["tiny"]
    assert report["pairs"] > 300 and report["budget"]["states_trimmed"] > 200
    dataset = load_from_disk(str(out / "dataset"))
    tokenizer = AutoTokenizer.from_pretrained(str(tiny))
    # A ~4-characters-per-token tokenizer, measured on the rows as the trainer renders them.
    chars = tokens = 0
    for row in dataset["train"].select(range(0, dataset["train"].num_rows, 10)):
        text = tokenizer.apply_chat_template(row["prompt"] + row["rejected"], tools=row["tools"],
                                             tokenize=False)
        chars += len(text)
        tokens += len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert 3.5 <= chars / tokens <= 4.5

    torch.manual_seed(0)
    args = DPOConfig(output_dir=str(fixtures_run["root"] / "train"), bf16=False, use_cpu=True, max_steps=2,
                     per_device_train_batch_size=1, report_to=[], logging_steps=1, save_strategy="no",
                     max_length=8192, seed=0, disable_tqdm=True)
    trainer = DPOTrainer(model=AutoModelForCausalLM.from_pretrained(str(tiny)),
                         ref_model=AutoModelForCausalLM.from_pretrained(str(tiny)), args=args,
                         train_dataset=dataset["train"], eval_dataset=dataset["test"],
                         processing_class=tokenizer)
    # Survive = kept by the trainer, nothing truncated: prompt + the longer completion within 8192 tokens.
    fitting = sum(len(r["prompt_ids"]) + max(len(r["chosen_ids"]), len(r["rejected_ids"])) <= 8192
                  for split in (trainer.train_dataset, trainer.eval_dataset) for r in split)
    assert fitting / report["pairs"] >= 0.95
    assert report["preflight_dropped"] == report["extra"]["preflight_dropped_by_reason"].get("too_long", 0)
    rows = dataset["train"].num_rows + dataset["test"].num_rows
    assert rows == report["pairs"] - report["preflight_dropped"]
    output = trainer.train()
    assert trainer.state.global_step == 2 and math.isfinite(output.training_loss)


def roles_alternate(messages: list[dict[str, Any]]) -> bool:
    roles = [m["role"] for m in messages if m["role"] != "system"]
    return all(role == ("user" if i % 2 == 0 else "assistant") for i, role in enumerate(roles))


def expected_problems(row: dict[str, Any]) -> dict[str, list[str]]:
    """By hand, from each template's source: which rows it cannot express, and what it drops."""
    assistants = [m for m in row["prompt"] + row["chosen"] + row["rejected"] if m["role"] == "assistant"]
    parallel = any(len(m.get("tool_calls") or ()) > 1 for m in assistants)
    text_beside_calls = any(m.get("tool_calls") and m["content"].strip() for m in assistants)
    alternates = all(roles_alternate(row["prompt"] + row[side]) for side in ("chosen", "rejected"))
    return {"qwen3": [],
            "llama3.1": (["template_error"] if parallel
                         else ["content_not_rendered"] if text_beside_calls else []),
            "hermes": ["content_not_rendered"] if text_beside_calls else [],
            "gemma3_error": [] if alternates else ["template_error"]}


def test_fixture_template_flags_match_the_hand_check(fixtures_run: dict[str, Any]) -> None:
    rows = all_rows(fixtures_run["out"])
    templates = fixtures_run["report"]["extra"]["preflight_templates"]
    assert set(templates) == set(TEMPLATES)
    for row in rows:
        expected = expected_problems(row)
        for name in ("qwen3", "llama3.1", "hermes"):
            assert row["preflight"][name] == expected[name], (name, row["state_id"])
        assert ("template_error" in row["preflight"]["gemma3"]) == bool(expected["gemma3_error"])
    for name in TEMPLATES:
        passed = sum(not row["preflight"][name] for row in rows)
        assert templates[name]["passed"] == passed and templates[name]["rows"] == len(rows)
    assert templates["qwen3"]["pass_rate"] == 1.0
    assert templates["llama3.1"]["problems"]["template_error"] > 50  # Claude Code calls tools in parallel
    assert templates["gemma3"]["pass_rate"] < 0.1  # no tool role at all


def test_fixture_card_parses_names_no_path_and_splits_by_trace(fixtures_run: dict[str, Any]) -> None:
    from datasets import load_dataset, load_from_disk
    from huggingface_hub import DatasetCard

    out, report = fixtures_run["out"], fixtures_run["report"]
    text = (out / "README.md").read_text(encoding="utf-8")
    header = DatasetCard(text).data.to_dict()
    assert header["license"] == "mit"
    assert {"configs", "task_categories", "tags", "size_categories"} <= set(header)
    assert "max_length=8192" in text and "| qwen3 |" in text and "| total |" in text
    for leak in (str(fixtures_run["root"]), "127.0.0.1", "/work/", "localhost"):
        assert leak not in text
    dataset = load_from_disk(str(out / "dataset"))
    train, test = set(dataset["train"]["trace_id"]), set(dataset["test"]["trace_id"])
    assert train and test and not train & test
    assert report["extra"]["splits"] == {"train": dataset["train"].num_rows, "test": dataset["test"].num_rows}
    # The card's `configs` point at the Arrow files (a cache of our own: datasets' default one is
    # shared by every folder named `out`).
    hub_style = load_dataset(str(out), cache_dir=str(fixtures_run["root"] / "hf-datasets"))
    assert hub_style["test"].to_list() == dataset["test"].to_list()


# --- acceptance of issue #25: every format of the fixtures' run trains -------------------------------------

def format_run(fixtures_run: dict[str, Any], fixtures_root: Path, fmt: str) -> dict[str, Any]:
    """The fixtures' run again in `fmt`, from the same cached answers (the teachers are not asked twice)."""
    out = fixtures_run["root"] / fmt
    report = run_fixtures(fixtures_root, fixtures_run["root"], out, "--format", fmt)
    from datasets import load_from_disk

    return {"out": out, "report": report, "dataset": load_from_disk(str(out / "dataset"))}


def check_outcomes_and_tools(dataset: Any, out: Path, tokenizer: Any, completion: str) -> None:
    """Every row's `student_outcome` is its state's outcome kind (null where none was recorded); tools
    are the state's, intact; and the chat template renders tool-call arguments as JSON objects."""
    from ingestion.store import load_states

    states = {s.state_id: s for s in load_states(out)}
    rendered = 0
    for row in dataset:
        state = states[row["state_id"]]
        outcome = state.metadata.get("outcome")
        assert row["student_outcome"] == (outcome["kind"] if outcome else None)
        assert row["tools"] == state.tools
        calls = [call for m in row["prompt"] + row[completion] for call in m.get("tool_calls") or ()]
        if calls and rendered < 20:
            text = tokenizer.apply_chat_template(row["prompt"] + row[completion], tools=row["tools"],
                                                 tokenize=False)
            for call in calls:
                arguments = call["function"]["arguments"]
                assert isinstance(arguments, dict)
                assert f'"arguments": {json.dumps(arguments, ensure_ascii=False)}' in text
            rendered += 1
    assert rendered == 20


def two_steps(trainer: Any) -> None:
    output = trainer.train()
    assert trainer.state.global_step == 2 and math.isfinite(output.training_loss)


def test_fixtures_dpo_rows_carry_outcomes_and_render_arguments_as_objects(fixtures_run: dict[str, Any]
                                                                         ) -> None:
    from datasets import concatenate_datasets, load_from_disk
    from transformers import AutoTokenizer

    dataset = load_from_disk(str(fixtures_run["out"] / "dataset"))
    both = concatenate_datasets([dataset["train"], dataset["test"]])
    tokenizer = AutoTokenizer.from_pretrained(str(fixtures_run["tiny"]))
    check_outcomes_and_tools(both, fixtures_run["out"], tokenizer, "chosen")
    assert fixtures_run["report"]["extra"]["format"] == {"name": "dpo", "trainer": "DPOTrainer",
                                                         "rows": both.num_rows}


def test_fixtures_kto_rows_train_with_kto_trainer(fixtures_run: dict[str, Any], fixtures_root: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import KTOConfig, KTOTrainer

    from ingestion.outcome import FAILED

    run = format_run(fixtures_run, fixtures_root, "kto")
    dataset, report, tiny = run["dataset"], run["report"], fixtures_run["tiny"]
    tokenizer = AutoTokenizer.from_pretrained(str(tiny))
    check_outcomes_and_tools(dataset, run["out"], tokenizer, "completion")
    assert report["pairs"] == fixtures_run["report"]["pairs"]  # the same answers, the same consensus
    rows = dataset.to_list()
    for row in rows:
        failed = row["student_outcome"] in FAILED
        if row["label"]:
            assert row["completion_from"] == "consensus" and row["verdict"] in ("pair", "agree")
            assert not (row["verdict"] == "agree" and failed)
        else:
            assert row["completion_from"] == "student" and failed and row["verdict"] in ("pair", "abstained")
    counts = report["extra"]["format"]
    assert counts["rows"] == len(rows) and counts["desirable"] == sum(r["label"] for r in rows)
    assert counts["from_verdicts"]["agree"] > 0 and counts["desirable"] > report["pairs"] * 0.9
    # Undesirable rows: failed student actions only, every failed one of the DPO run's pairs among them.
    from ingestion.outcome import is_failed
    from ingestion.store import load_states

    failed = {s.state_id for s in load_states(run["out"]) if is_failed(s.metadata.get("outcome"))}
    undesirable = {r["state_id"] for r in rows if not r["label"]}
    assert undesirable <= failed and counts["undesirable"] == len(undesirable)
    card = (run["out"] / "README.md").read_text(encoding="utf-8")
    assert "from trl import KTOConfig, KTOTrainer" in card and "Format: `kto`" in card
    assert f"| kto: undesirable | {counts['undesirable']} |" in card
    pairs = all_rows(fixtures_run["out"])
    assert {r["state_id"] for r in pairs if r["student_outcome"] in FAILED} <= undesirable

    torch.manual_seed(0)
    args = KTOConfig(output_dir=str(run["out"] / "train"), bf16=False, use_cpu=True, max_steps=2,
                     per_device_train_batch_size=2, report_to=[], logging_steps=1, save_strategy="no",
                     max_length=8192, seed=0, disable_tqdm=True)
    trainer = KTOTrainer(model=AutoModelForCausalLM.from_pretrained(str(tiny)),
                         ref_model=AutoModelForCausalLM.from_pretrained(str(tiny)), args=args,
                         train_dataset=dataset, processing_class=tokenizer)
    # Kept by the trainer: all but rows whose prompt alone passes 8192 tokens of this tokenizer (the run
    # fitted them with the 4-characters-per-token estimate), as for DPO above.
    assert trainer.train_dataset.num_rows >= 0.95 * len(rows)
    first = trainer.train_dataset[0]
    text = tokenizer.decode(first["prompt_ids"] + first["completion_ids"])
    assert "# Tools" in text and '"name": "Bash"' in text  # the tools reach the model
    two_steps(trainer)


def test_fixtures_sft_rows_train_with_sft_trainer(fixtures_run: dict[str, Any], fixtures_root: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    run = format_run(fixtures_run, fixtures_root, "sft")
    dataset, report, tiny = run["dataset"], run["report"], fixtures_run["tiny"]
    tokenizer = AutoTokenizer.from_pretrained(str(tiny))
    check_outcomes_and_tools(dataset, run["out"], tokenizer, "completion")
    assert set(dataset["verdict"]) == {"pair", "agree"}
    assert report["extra"]["format"]["rows"] == dataset.num_rows

    torch.manual_seed(0)
    args = SFTConfig(output_dir=str(run["out"] / "train"), bf16=False, use_cpu=True, max_steps=2,
                     per_device_train_batch_size=2, report_to=[], logging_steps=1, save_strategy="no",
                     max_length=8192, seed=0, disable_tqdm=True)
    trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(str(tiny)), args=args,
                         train_dataset=dataset, processing_class=tokenizer)
    assert trainer.train_dataset.num_rows >= 0.95 * dataset.num_rows
    first = trainer.train_dataset[0]
    # The loss is on the consensus only: the prompt's tokens are masked out of the labels.
    assert 0 < sum(label != -100 for label in first["labels"]) < len(first["input_ids"])
    assert "# Tools" in tokenizer.decode(first["input_ids"])
    two_steps(trainer)
