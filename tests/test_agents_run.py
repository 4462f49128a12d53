"""The user's command over other agents' logs (issue #26 acceptance), against loopback teachers that
answer in the vocabulary of the tools each request offers."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from replay.run import main
from tests.llm_server import LLMServer, Reply, chat_completion
from tests.teacher_script import COMMANDS, prompt_hash
from tests.tiny_model import build_four_chars_tiny, train_dpo_two_steps

DATA = Path(__file__).parent / "data" / "agents"
# Each agent's shell tool and how it takes a command.
SHELLS = {"Bash": lambda c: {"command": c}, "shell": lambda c: {"command": ["bash", "-lc", c]},
          "exec_command": lambda c: {"cmd": c}, "shell_command": lambda c: {"command": c},
          "run_shell_command": lambda c: {"command": c}}
# rejection-codex-001, the real exec run, compact-codex-001, the session made by the real CLI
OPENAI_STUDENT_STATES = 7 + 1 + 6 + 6
CODEX_STATES = OPENAI_STUDENT_STATES + 6   # and 6 with no model recorded or a synthetic one


def in_vocabulary(body: dict[str, Any]) -> Reply:
    """Every teacher runs the same command (chosen by the prompt) with the shell tool the state offers."""
    names = [t["function"]["name"] for t in body.get("tools") or ()]
    name = next(n for n in names if n in SHELLS)
    command = COMMANDS[prompt_hash(body) % len(COMMANDS)]
    return Reply(chat_completion(tool_calls=[{"name": name, "arguments": SHELLS[name](command)}],
                                 model=body.get("model", "")))


def run(source: str, out: Path, teachers: str, *extra: str) -> dict[str, Any]:
    assert main(["--source", source, "--out", str(out), "--teachers", teachers,
                 "--cache", str(out.parent / "cache.sqlite"), *extra]) == 0
    return json.loads((out / "report.json").read_text())


def test_gpt5_never_votes_on_openai_student_states(tmp_path: Path) -> None:
    with LLMServer(in_vocabulary) as server:
        teachers = f"gpt-5=openai/gpt-5@{server.url},deepseek=openai/deepseek-chat@{server.url}"
        report = run(str(DATA / "codex"), tmp_path / "out", teachers)
        models = [r["model"] for r in server.requests]
    assert report["states"] == CODEX_STATES
    assert report["formats"] == {"codex": {"files": 8, "states": CODEX_STATES}}
    assert report["excluded_same_family"] == {"gpt-5": OPENAI_STUDENT_STATES}
    # gpt-5 is asked only where the student is not OpenAI's (no model recorded, a synthetic one).
    assert models.count("gpt-5") == CODEX_STATES - OPENAI_STUDENT_STATES
    assert models.count("deepseek-chat") == CODEX_STATES
    # Its requests carry Codex's own tools, never a Claude Code one.
    for request in server.requests:
        names = {t["function"]["name"] for t in request["tools"]}
        assert "apply_patch" in names and not names & {"Bash", "Edit", "Read"}
    assert report["states_failed"] == 0 and report["pairs"] > 0


def test_sources_mix_repeated_and_comma_separated(tmp_path: Path) -> None:
    with LLMServer(in_vocabulary) as server:
        teachers = f"a=openai/a@{server.url}"
        report = run(f"{DATA / 'codex' / 'kvsankar'},{DATA / 'gemini'}", tmp_path / "one", teachers,
                     "--dry-run")
        again = run(str(DATA / "codex" / "kvsankar"), tmp_path / "two", teachers, "--dry-run",
                    "--source", str(DATA / "gemini"))
    assert report["formats"] == again["formats"] == {"codex": {"files": 3, "states": 14},
                                                     "gemini": {"files": 3, "states": 12}}


def test_mixed_folder_pairs_train_two_dpo_steps(fixtures_root: Path, tmp_path: Path) -> None:
    from datasets import load_from_disk

    mixed = tmp_path / "mixed"
    shutil.copytree(DATA / "codex", mixed / "codex")
    shutil.copytree(DATA / "gemini", mixed / "gemini")
    session = next(fixtures_root.rglob("fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"))
    (mixed / "claude").mkdir()
    shutil.copy(session, mixed / "claude" / session.name)
    states = list(iter_states(mixed, IngestOptions(max_length=4096), IngestStats()))
    tiny = build_four_chars_tiny(tmp_path / "tiny", states)
    with LLMServer(in_vocabulary) as server:
        teachers = ",".join(f"{n}=openai/{n}@{server.url}" for n in ("ta", "tb", "tc"))
        report = run(str(mixed), tmp_path / "out", teachers, "--max-length", "4096")
    assert set(report["formats"]) == {"claude_code", "codex", "gemini"}
    assert report["states_failed"] == 0
    dataset = load_from_disk(str(tmp_path / "out" / "dataset"))
    assert {row["source"] for row in dataset} == {"claude_code", "codex", "gemini"}

    trainer, output = train_dpo_two_steps(tiny, dataset, tmp_path / "train")
    assert trainer.state.global_step == 2 and math.isfinite(output.training_loss)


def test_states_round_trip_through_the_store(tmp_path: Path) -> None:
    from ingestion.store import load_states
    from replay.ingest.read import ingest_to_file

    report, _ = ingest_to_file(DATA, tmp_path, IngestOptions())
    direct = [s.model_dump() for s in iter_states(DATA, IngestOptions(), IngestStats())]
    assert [s.model_dump() for s in load_states(tmp_path)] == direct
    assert report.formats == {"codex": {"files": 8, "states": CODEX_STATES},
                              "gemini": {"files": 3, "states": 12}}
