"""vLLM itself, not a stand-in: the CPU build (tests/vllm_cpu.py) serving SmolLM2-135M-Instruct.

`pytest -m vllm` (with docker: the toy instances of tests/collect_toy.py). One server for the module,
started with runtime adapter loading. On the real server:
- `collect.run`'s mini agent: on every turn prompt and completion token ids and one logprob per completion
  token; the project's prefix check on every turn (a break must be named, and be a re-tokenization of
  text the model sampled); the turn's messages with the header's tools, rendered by the served model's
  own chat template, give exactly that turn's `prompt_token_ids`;
- Claude Code's proxy (collect.proxy) in front of it, asked as the CLI asks: the same on its records;
- `replay.loop --engine vllm` on the CPU: the loop starts vLLM itself and runs a round end to end, its
  rollouts checked as above and replay.eval asking both rounds as served;
- the loop's `--engine url` against the module's server: round 1's adapter (the vllm loop's) loaded at
  run time and asked, answering otherwise than round 0 (one loop for the tier: a round of training costs
  minutes on 2 cores).
Skipped, saying why, only where the venv or the model folder cannot be made.
"""

from __future__ import annotations

import functools
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import vllm_cpu
from tests.llm_server import LLMServer, Reply, chat_completion
from tests.loop_student import PREFERRED

ROOT = Path(__file__).resolve().parents[1]
HELD, TRAIN = ["toy__calc-41"], ["toy__calc-42", "toy__calc-43"]
SERVED = "student"
REAL = [pytest.mark.docker, pytest.mark.vllm]


@pytest.fixture(scope="module")
def model() -> Path:
    try:
        return vllm_cpu.smollm2_folder()
    except vllm_cpu.Unavailable as why:
        pytest.skip(str(why))


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    try:
        return vllm_cpu.python_of()
    except vllm_cpu.Unavailable as why:
        pytest.skip(str(why))


@pytest.fixture(scope="module")
def server(model: Path, vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    with vllm_cpu.serve(model, "--served-model-name", SERVED, lora=True, log=log) as url:
        yield url


@pytest.fixture(scope="module")
def tag(client: Any) -> str:
    from tests.collect_toy import ensure_instance_images

    return ensure_instance_images(client, HELD + TRAIN)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_rows(path: Path, ids: list[str]) -> Path:
    from tests.collect_toy import toy_instance

    path.write_text("".join(json.dumps(toy_instance(i, i)) + "\n" for i in ids))
    return path


@functools.cache
def _tokenizer(model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


def rendered(model: Path, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
    """The prompt ids the served model's chat template makes of `messages` and `tools`."""
    tokenizer = _tokenizer(model)
    text = tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True,
                                         tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def check_turns(rollouts: list[list[dict[str, Any]]], model: Path, tools_of: Any) -> dict[str, Any]:
    """Every turn has ids and logprobs and re-renders to its prompt ids; each extends the turn before it,
    or its break is named `retokenized` and is one; returns the figures."""
    turns = [turn for rollout in rollouts for turn in rollout]
    for turn in turns:
        assert turn["prompt_token_ids"] and turn["completion_token_ids"]
        assert len(turn["logprobs"]) == len(turn["completion_token_ids"])
    mismatches = [n for n, t in enumerate(turns) if rendered(model, *tools_of(t)) != t["prompt_token_ids"]]
    breaks = []
    for rollout in rollouts:
        for before, after in zip(rollout, rollout[1:], strict=False):
            if after["prefix_ok"] is False:
                assert after["prefix_break"]["reason"] == "retokenized", after["prefix_break"]
                assert retokenized(model, before, after)
                breaks.append(after["prefix_break"])
            else:
                assert after["prefix_ok"] is True
    return {"rollouts": len(rollouts), "turns": len(turns), "with_ids": len(turns), "prefix_breaks": breaks,
            "rerender_mismatches": mismatches}


def retokenized(model: Path, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """The break is the model's own (collect.student.explain_break's `retokenized`, read with the served
    tokenizer): from the first token that differs, the next prompt holds the same text as the last prompt
    and completion, cut into other tokens (the model sampled a split the tokenizer does not make)."""
    tokenizer = _tokenizer(model)
    written, prompt = before["prompt_token_ids"] + before["completion_token_ids"], after["prompt_token_ids"]
    first = next(n for n, (a, b) in enumerate(zip(written, prompt, strict=False)) if a != b)
    return tokenizer.decode(prompt[first:]).startswith(tokenizer.decode(written[first:]))


def rollout_turns(folder: Path) -> list[list[dict[str, Any]]]:
    rollouts = []
    for path in sorted(folder.glob("*.rollout.jsonl")):
        header, *rest = lines(path)
        rollouts.append([{**r, "tools": header["tools"]} for r in rest if r.get("type") == "turn"])
    return rollouts


# --- collect.run's mini agent ------------------------------------------------------------------------

@pytest.mark.docker
@pytest.mark.vllm
def test_mini_agent_rollouts_carry_ids_extend_their_prefix_and_re_render(
        tmp_path: Path, server: str, tag: str, model: Path, client: Any) -> None:
    from collect.runtime import LABEL, containers
    from tests.collect_toy import NAMESPACE

    out = tmp_path / "out"
    argv = [sys.executable, "-m", "collect.run", "--instances", str(write_rows(tmp_path / "i.jsonl", TRAIN)),
            "--student-url", server, "--student-model", SERVED, "--out", str(out), "--namespace", NAMESPACE,
            "--image-tag", tag, "--max-turns", "3", "--max-tokens", "48", "--seed", "0", "-q"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    rollouts = rollout_turns(out)
    assert report["rollouts"] == len(rollouts) == len(TRAIN)
    assert report["turns_with_token_ids"] == report["turns"] == sum(map(len, rollouts))
    seen = check_turns(rollouts, model, lambda t: (t["messages"], t["tools"]))
    print(f"\nvllm mini agent: {seen}, tool calls "
          f"{report['servers'][0]['tool_calls']}")
    assert seen["rerender_mismatches"] == []
    assert sum(report["prefix_breaks"].values()) == len(seen["prefix_breaks"])
    assert [c.name for c in containers(client, {"label": LABEL})] == []


# --- Claude Code's proxy ------------------------------------------------------------------------------

BASH = {"name": "Bash", "description": "Run a shell command in /testbed", "input_schema": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}


def as_vllm_reads(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A message whose content is a list of text parts (the proxy's system prompt, as Claude Code sends it
    in blocks) is one string to a template that renders strings: vLLM joins the parts with newlines."""
    return [{**m, "content": "\n".join(p["text"] for p in m["content"])}
            if isinstance(m.get("content"), list) else m for m in messages]


@pytest.mark.vllm
def test_claude_codes_proxy_in_front_of_vllm_carries_ids_extends_its_prefix_and_re_renders(
        tmp_path: Path, server: str, model: Path) -> None:
    """Claude Code's own requests hold ~25k tokens (its system prompt and tools), past SmolLM2's 8,192; the
    proxy the CLI talks to is asked as the CLI asks (system blocks, tools, streamed, the history sent
    back as the proxy answered it) over three turns."""
    import anthropic

    from collect.proxy import AnthropicProxy, ProxyConfig
    from collect.reply import StudentReply, extends

    config = ProxyConfig(backend_url=server, default_backend=SERVED, models={"claude-haiku-4-5": SERVED},
                         main_models=["claude-sonnet-4-6"], max_retries=0, max_tokens=24, temperature=0)
    system = [{"type": "text", "text": "You are Claude Code, working in /testbed."},
              {"type": "text", "text": "Use the Bash tool to look at files before you change them."}]
    history: list[dict[str, Any]] = [{"role": "user", "content": "add(2, 3) returns -1 instead of 5."}]
    with AnthropicProxy(config) as proxy:
        client = anthropic.Anthropic(base_url=proxy.route("k1", tmp_path / "proxy.jsonl"), api_key="dummy",
                                     max_retries=0)
        for follow_up in ("Go on.", "Show me calc.py.", None):
            with client.messages.stream(model="claude-sonnet-4-6", max_tokens=32000, system=system,
                                        tools=[BASH], messages=history) as stream:
                message = stream.get_final_message()
            history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                             for b in message.content]})
            uses = [b for b in message.content if b.type == "tool_use"]
            if uses:
                history.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": u.id, "content": "calc.py\ntests"} for u in uses]})
            elif follow_up:
                history.append({"role": "user", "content": follow_up})
    records = [r for r in lines(tmp_path / "proxy.jsonl") if r["role"] == "main"]
    assert len(records) == 3 and all(r["status"] == 200 and r["stream"] for r in records)
    replies = [StudentReply({}, prompt_token_ids=r["prompt_token_ids"],
                            completion_token_ids=r["completion_token_ids"]) for r in records]
    for before, after, record in zip(replies, replies[1:], records[1:], strict=False):
        record["prefix_ok"] = extends(before, after)            # the project's check, as collect.run's
        record["prefix_break"] = None if record["prefix_ok"] else {"reason": "retokenized"}
    seen = check_turns([records], model, lambda r: (as_vllm_reads(r["request"]["messages"]),
                                                    r["request"].get("tools") or []))
    print(f"\nvllm claude-code proxy: {seen}")
    assert seen["rerender_mismatches"] == []


# --- replay.loop --------------------------------------------------------------------------------------

def teacher(request: dict[str, Any]) -> Reply:
    """Every teacher prefers reading calc.py to what the student did."""
    return Reply(chat_completion("", [PREFERRED], model=request.get("model", "t"), prompt_tokens=1000,
                                 completion_tokens=10))


def containers_of(client: Any) -> list[Any]:
    from collect.runtime import LABEL, containers

    return containers(client, {"label": LABEL})


@pytest.fixture(scope="module")
def vllm_loop(tmp_path_factory: pytest.TempPathFactory, tag: str, model: Path, vllm_python: Path) -> Path:
    """One round of `replay.loop --engine vllm` on the CPU, end to end (its OUT): the loop starts vLLM's
    CPU build itself, round 0 alone, then again with round 1's adapter (--lora-modules).

    Sized for CI's 2 cores, as what is tested is the engine and not the training: SFT (no reference
    model's passes, as DPO has) with one step and no held-out judging before and after (--no-eval), and
    vLLM eager (--enforce-eager: round 0 alone is the one start that would compile, ~80-130 s; a server
    with adapters runs eager anyway)."""
    from tests.collect_toy import NAMESPACE

    folder = tmp_path_factory.mktemp("loop")
    with LLMServer(teacher) as teachers:
        pool = f"t1=openai/t1@{teachers.url}#price=1/2,t2=openai/t2@{teachers.url}#price=1/2"
        args = ["--instances", str(write_rows(folder / "train.jsonl", TRAIN)),
                "--held-out", str(write_rows(folder / "held.jsonl", HELD)), "--student", str(model),
                "--teachers", pool, "--out", str(folder / "out"), "--rounds", "1", "--cpu",
                "--max-turns", "2", "--max-tokens", "24", "--temperature", "0", "--test-split", "0.5",
                "--format", "sft", "--max-steps", "1", "--batch-size", "2", "--learning-rate", "0.05",
                "--train-args=--no-eval", "--collect-args", f"--namespace {NAMESPACE} --image-tag {tag}",
                "--engine", "vllm", "--vllm-python", str(vllm_python),
                "--vllm-args", shlex.join([*vllm_cpu.SERVER_FLAGS, "--enforce-eager"])]
        done = subprocess.run([sys.executable, "-m", "replay.loop", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=2400, env=vllm_cpu.server_env())
    assert done.returncode == 0, done.stderr
    return folder / "out"


@pytest.mark.docker
@pytest.mark.vllm
def test_loop_on_vllm_cpu_runs_a_round_end_to_end(vllm_loop: Path, model: Path, client: Any) -> None:
    out = vllm_loop
    ledger = json.loads((out / "loop.json").read_text())
    stages = {(int(r), s) for r, data in ledger["rounds"].items() for s in data["stages"]}
    assert stages == {(0, "resolve"), (0, "heldout"), (0, "eval"), (1, "collect"), (1, "pairs"),
                      (1, "train"), (1, "resolve"), (1, "eval")} and ledger["running"] is None
    rounds = ledger["rounds"]
    assert rounds["1"]["stages"]["pairs"]["pairs"] > 0
    # replay.eval asked both rounds as vLLM served them, round 1 as its adapter.
    evaluation = rounds["1"]["stages"]["eval"]
    assert set(evaluation["models"]) == {"round-0", "round-1"}
    assert all(m["answered"] > 0 for m in evaluation["models"].values())
    # Two starts: round 0 alone, then round 0 with round 1's adapter, which the held-out rollouts asked for
    # by name (collect.run's start-up check refuses a name the server does not list).
    assert len(list((out / "logs").glob("serve-*.log"))) == 2
    assert rounds["1"]["stages"]["resolve"]["student"] == "round-1"
    assert lines(next((out / "round-1" / "resolve").glob("*.rollout.jsonl")))[0]["student_model"] == "round-1"
    assert not (out / "servers.json").exists() and containers_of(client) == []
    # Every stage's rollouts went through the real server: ids, prefixes, re-rendering.
    rollouts = [r for stage in ("round-0/resolve", "round-1/collect", "round-1/resolve")
                for r in rollout_turns(out / stage)]
    seen = check_turns(rollouts, model, lambda t: (t["messages"], t["tools"]))
    seconds = {f"{r}/{s}": d["seconds"] for r, v in rounds.items() for s, d in v["stages"].items()}
    print(f"\nvllm --engine vllm: {seen}; seconds {seconds}")
    assert seen["rerender_mismatches"] == []


def ask(url: str, name: str) -> str:
    body = {"model": name, "max_tokens": 24, "temperature": 0,
            "messages": [{"role": "user", "content": "Fix the failing test in calc.py."}]}
    answer = httpx.post(f"{url}/chat/completions", json=body, timeout=300).json()
    return answer["choices"][0]["message"]["content"]


@pytest.mark.docker
@pytest.mark.vllm
def test_engine_url_loads_round_1_at_run_time_and_its_weights_answer(vllm_loop: Path, server: str,
                                                                      model: Path) -> None:
    """--engine url against the module's server (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True): the loop's engine
    loads round 1's adapter (the vllm loop's) by vLLM's runtime route; asked, greedy, it answers otherwise
    than round 0, which answers alike twice."""
    from replay.loop.config import LoopConfig
    from replay.loop.run import student
    from replay.loop.serving import open_engine

    config = LoopConfig(instances=vllm_loop / "i", held_out=vllm_loop / "h", student=str(model), teachers="t",
                        out=vllm_loop, engine="url", url=server, served_name=SERVED)
    engine = open_engine(config)
    try:
        assert engine.url(student(config, 0)) == server
        assert engine.url(student(config, 1)) == server
    finally:
        engine.close()
    listed = {m["id"]: m for m in httpx.get(f"{server}/models", timeout=30).json()["data"]}
    assert listed["round-1"]["root"] == str((vllm_loop / "round-1" / "trained").resolve())
    before, after, again = ask(server, SERVED), ask(server, "round-1"), ask(server, SERVED)
    print(f"\nvllm --engine url: round 0 {before!r}; round 1 {after!r}")
    assert before == again and after != before


# --- bad input (main tier) ---------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["missing", "no_vllm"])
def test_a_vllm_python_that_cannot_serve_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    python = str(tmp_path / "nothing" / "python") if case == "missing" else sys.executable
    args = ["--instances", str(write_rows(tmp_path / "t.jsonl", TRAIN)),
            "--held-out", str(write_rows(tmp_path / "h.jsonl", HELD)), "--student", str(folder),
            "--teachers", "t=openai/t@http://127.0.0.1:9/v1", "--out", str(tmp_path / "out"),
            "--engine", "vllm", "--vllm-python", python]
    done = subprocess.run([sys.executable, "-m", "replay.loop", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    lines_ = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines_) == 1, done.stderr
    expected = {"missing": "no such interpreter", "no_vllm": "that environment has no vLLM"}[case]
    assert lines_[0].startswith("replay.loop: error: --vllm-python ") and expected in lines_[0]
    assert not (tmp_path / "out" / "loop.json").exists()
