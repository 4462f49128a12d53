"""Issue #35: every command of docs/getting-started.md runs, in order, and makes what the page says.

The page's bash and python blocks are read from the page itself, so a command edited there is the
command tested here. Teachers and the student's server are one loopback server speaking the OpenAI API
(tests/student_scenario.py's scripted models), `~/.claude/projects` holds that scenario's sessions (HOME
is a temporary folder), and the outputs go to a temporary folder. What is replaced, and why:

- `--teachers gpt-5,deepseek` → the same two names at the loopback server (`name=openai/name@URL#price=`):
  the aliases would reach OpenAI's and DeepSeek's APIs;
- `http://localhost:8000/v1` (the vLLM server) → the loopback server;
- `--model Qwen/Qwen3-0.6B` → a tiny random model built here on the run's texts, ~4 characters per token
  like the real one's (tests/tiny_model.py: nothing downloaded);
- `replay-out`, `./student` → folders under tmp_path; `make run` → `make -o .venv/.installed run OUT=...`
  (the install step `make test` has done already, which would otherwise ask the package index).

Two blocks are not run, each marked on the page: `make test` (the suite this test is part of) and
`vllm serve` (a GPU and vLLM; the loopback server answers in its place).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests import student_scenario as scenario
from tests.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "getting-started.md"
PYTHON = ROOT / ".venv" / "bin" / "python"
_BLOCK = re.compile(r"(<!-- not run[^>]*-->\n)?```(bash|python)\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str, bool]]:
    """(language, text, run?) for every fenced bash / python block of the page, in order."""
    return [(lang, text, not note) for note, lang, text in _BLOCK.findall(PAGE.read_text(encoding="utf-8"))]


def test_only_the_marked_blocks_are_left_out() -> None:
    left_out = [text.strip() for _, text, run in blocks() if not run]
    assert left_out == ["make test", next(t.strip() for _, t, _ in blocks() if t.startswith("vllm serve"))]
    assert len([b for b in blocks() if b[2]]) == 6   # make run, the run, view + states, python, train, eval


def _substitute(text: str, url: str, tmp: Path, tiny: Path) -> str:
    teachers = ",".join(f"{name}=openai/{name}@{url}#price=1/2" for name in ("gpt-5", "deepseek"))
    text = text.replace("--teachers gpt-5,deepseek", f"--teachers {teachers}")
    text = text.replace("http://localhost:8000/v1", url)
    text = text.replace("--model Qwen/Qwen3-0.6B", f"--model {tiny}")
    text = text.replace("--output student", f"--output {tmp / 'student'}")
    text = text.replace("make run", f"make -o .venv/.installed run OUT={tmp / 'replay-out'}")
    return re.sub(r"(?<![\w/])replay-out", str(tmp / "replay-out"), text)


@pytest.mark.skipif(not PYTHON.exists(), reason=f"needs the checkout's own venv ({PYTHON}): run `make test`")
def test_every_command_of_the_page_runs(tmp_path: Path) -> None:
    from ingestion.store import load_states
    from tests.tiny_model import build_four_chars_tiny

    home = tmp_path / "home"
    scenario.write_sessions(home / ".claude" / "projects", episodes=16)
    tiny = tmp_path / "tiny"
    env = {**os.environ, "HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_COLOR": "1"}
    out = tmp_path / "replay-out"
    with LLMServer(scenario.respond) as server:
        runs = []
        for lang, text, run in blocks():
            if not run:
                continue
            if "--model Qwen/" in text:  # ~4 characters per token, like the page's model, on the run's texts
                build_four_chars_tiny(tiny, list(load_states(tmp_path / "replay-out")))
            script = _substitute(text, server.url, tmp_path, tiny)
            command = (["bash", "-e", "-o", "pipefail", "-c", script] if lang == "bash"
                       else [str(PYTHON), "-c", script])
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
            assert done.returncode == 0, f"{text}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            runs.append((text, done.stdout))

    by_first_line = {text.strip().splitlines()[0]: stdout for text, stdout in runs}
    # 1. make run: the dry run's states, its table, and the next step.
    dry = by_first_line["make run"]
    assert "Next:" in dry and "-m replay.run" in dry.split("Next:")[1]
    # 2. the real run: pairs in train and test splits, the card, the report.
    report = json.loads((out / "report.json").read_text())
    assert report["pairs"] > 0 and report["dry_run"] is False
    assert {p.name for p in (out / "dataset").iterdir()} >= {"train", "test", "dataset_dict.json"}
    assert (out / "README.md").is_file() and (out / "verdicts.jsonl").is_file()
    # 3. the view's pages, states as JSON, the dataset from Python.
    assert (out / "view" / "index.html").is_file()
    viewed = next(stdout for text, stdout in runs if "replay.states" in text)
    assert 'view/index.html: ' in viewed and '\n{"state_id"' in viewed
    assert "DatasetDict" in next(stdout for text, stdout in runs if "load_from_disk" in text)
    # 4. the trained student's held-out figures, and the eval of base and student.
    held_out = json.loads((tmp_path / "student" / "held_out.json").read_text())
    assert held_out["before"]["yardsticks"] and held_out["after"]["yardsticks"]
    evaluation = json.loads((out / "eval" / "eval.json").read_text())
    assert [m["name"] for m in evaluation["models"]] == ["base", "student"]
    assert evaluation["differences"], "no paired difference student − base"
