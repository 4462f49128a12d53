"""`replay.run --teachers a,b,c` end to end: consensus, pairs, dataset, card, early stop, TRL training."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

from consensus.canonical import canonical
from ingestion.schema import Action
from replay.run import main
from tests.llm_server import LLMServer, Reply, chat_completion
from tests.teacher_script import scripted
from tests.tiny_model import build_tiny


def pool(url: str, *names: str) -> str:
    return ",".join(f"{n}=openai/{n}@{url}" for n in names)


def run(source: Path, out: Path, teachers: str, *extra: str) -> dict:
    assert main(["--source", str(source), "--out", str(out), "--teachers", teachers,
                 "--cache", str(out.parent / "cache.sqlite"), *extra]) == 0
    return json.loads((out / "report.json").read_text())


def as_action(message: dict) -> Action:
    calls = [{"id": c.get("id", "x"), "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in message.get("tool_calls") or []]
    return Action(content=message.get("content") or "", tool_calls=calls)


def test_one_command_writes_dataset_card_and_report(fixtures_root: Path, tmp_path: Path) -> None:
    from datasets import load_from_disk

    out = tmp_path / "out"
    with LLMServer(partial(scripted, agreeing=("a", "b"))) as server:
        report = run(fixtures_root, out, pool(server.url, "a", "b", "c"))
    assert (out / "dataset").is_dir() and (out / "README.md").is_file() and (out / "pairs.jsonl").is_file()
    outcomes = (report["states_all_teachers_excluded"] + report["consensus"]["abstained"]
                + report["agree"] + report["pairs"])
    assert outcomes == report["states"] == 327
    assert report["consensus"]["reached"] == report["agree"] + report["pairs"]
    assert report["pairs"] > 100 and report["agree"] > 0  # the student sometimes did what a and b say
    dataset = load_from_disk(str(out / "dataset"))
    assert dataset.num_rows == report["pairs"]
    assert {"prompt", "chosen", "rejected", "tools", "state_id", "trace_id", "turn", "source",
            "student_model", "teachers", "votes", "agreement", "method"} <= set(dataset.column_names)
    for row in dataset:
        cwd = None
        chosen, rejected = as_action(row["chosen"][0]), as_action(row["rejected"][0])
        assert canonical(chosen, cwd) != canonical(rejected, cwd)
        assert row["teachers"] == ["a", "b", "c"] and row["method"] == "vote"
        assert row["agreement"] > 0.5
    card = (out / "README.md").read_text()
    assert "python -m replay.run" in card and "vote" in card


def test_run_output_trains_with_trl(fixtures_root: Path, tmp_path: Path) -> None:
    import torch
    from datasets import load_from_disk
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    tiny = build_tiny(tmp_path / "tiny")
    session = next(fixtures_root.rglob("d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl"))
    out = tmp_path / "out"
    with LLMServer(partial(scripted, agreeing=("a", "b"))) as server:
        report = run(session, out, pool(server.url, "a", "b", "c"), "--preflight-tokenizer", str(tiny),
                     "--max-prompt-tokens", "1000", "--max-message-chars", "500", "--max-length", "12000")
    dataset = load_from_disk(str(out / "dataset"))
    assert dataset.num_rows == report["pairs"] - report["preflight_dropped"] >= 2
    tokenizer = AutoTokenizer.from_pretrained(str(tiny))
    row = dataset[0]
    rendered = tokenizer.apply_chat_template(row["prompt"] + row["chosen"], tools=row["tools"],
                                             tokenize=False)
    command = row["chosen"][0]["tool_calls"][0]["function"]["arguments"]["command"]
    # The arguments render as a JSON object, not as a quoted string.
    assert json.dumps({"command": command, "description": "asked by a"}) in rendered
    torch.manual_seed(0)
    args = DPOConfig(output_dir=str(tmp_path / "train"), bf16=False, use_cpu=True, max_steps=2,
                     per_device_train_batch_size=2, report_to=[], save_strategy="no", max_length=12000,
                     disable_tqdm=True)
    trainer = DPOTrainer(model=AutoModelForCausalLM.from_pretrained(str(tiny)),
                         ref_model=AutoModelForCausalLM.from_pretrained(str(tiny)), args=args,
                         train_dataset=dataset, processing_class=tokenizer)
    assert math.isfinite(trainer.train().training_loss) and trainer.state.global_step == 2


# Priced names, so litellm's cost map gives a cheapest-first order and a USD figure for what was saved.
CHEAP, MID, DEAR = "gpt-4o-mini", "gpt-4.1-mini", "gpt-4o"


def test_early_stop_asks_two_when_two_agree(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob("03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"))  # 9 states
    responder = partial(scripted, agreeing=(CHEAP, MID))
    # loopback endpoints are priced only by their spec: each at the price of the model it stands for
    teachers_order_dear_first = ",".join(f"{n}=openai/{n}@{{url}}#price={n}" for n in (DEAR, MID, CHEAP))
    with LLMServer(responder) as server:
        teachers = teachers_order_dear_first.replace("{url}", server.url)
        stopped = run(session, tmp_path / "early" / "out", teachers, "--early-stop")
        early_requests = list(server.requests)
    with LLMServer(responder) as server:
        teachers = teachers_order_dear_first.replace("{url}", server.url)
        full = run(session, tmp_path / "full" / "out", teachers)
        full_requests = list(server.requests)
    assert len(early_requests) == 2 * 9 and len(full_requests) == 3 * 9
    assert {r["model"] for r in early_requests} == {CHEAP, MID}  # cheapest first; the dear one never asked
    saved = stopped["extra"]["early_stop"]
    assert saved["calls_saved"] == 9 and saved["usd_saved"] > 0
    for key in ("agree", "pairs"):
        assert stopped[key] == full[key]  # the outcome is the same, only cheaper


def test_judge_picks_blind_and_is_cached(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob("03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"))
    judged: list[dict] = []

    def responder(body: dict) -> object:
        if body["model"] == "judge":
            judged.append(body)
            return Reply(chat_completion("Candidate 1 reads the files first.\nANSWER: 1", model="judge"))
        return scripted(body)

    with LLMServer(responder) as server:
        args = ["--consensus", "judge", "--judge", f"judge=openai/judge@{server.url}"]
        report = run(session, tmp_path / "one" / "out", pool(server.url, "a", "b", "c"), *args)
        first = len(judged)
        again = run(session, tmp_path / "one" / "again", pool(server.url, "a", "b", "c"), *args)
    assert 0 < first <= report["states"] and len(judged) == first  # the re-run asked the judge nothing
    assert again["pairs"] == report["pairs"] and report["consensus"]["abstained"] == 0
    prompt = json.dumps(judged[0]["messages"])
    assert all(f'"{name}"' not in prompt for name in ("a", "b", "c")) and "asked by" in prompt
    assert report["extra"]["judge_calls"]["made"] == first
