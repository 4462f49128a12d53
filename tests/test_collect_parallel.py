"""Parallel tool calls keep the token prefix (#34 item 3), against vLLM 0.10.2 and 0.33.0 serving the model's
own chat template (Qwen3's for the hermes parser, Qwen3-Coder's for qwen3_coder) and Qwen's real BPE
(tests/vllm_server.py `template="model"`).

The model writes each turn the way its template renders one (the form it was trained on), or, as a
sampled model sometimes does, a little otherwise: a blank line between two calls, a line of text between
them, its JSON without spaces. The parsed reply cannot say any of that again: the tool parser keeps only
the text before the first call and re-serialises the arguments, and the template writes its own
separators. So the agent sends the reply back as generated, and each prompt extends the last. A break
that is left (a template that rewrites earlier history, the same text cut into other tokens) is
explained in the turn and counted in the report.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from collect.agent import run_agent
from collect.config import load_agent_spec
from collect.records import RolloutWriter
from collect.report import RunReport
from collect.runner import final_outcome
from collect.student import Student
from ingestion.rollout_format import FinalRecord, RolloutHeader, dump_record
from ingestion.rollouts import iter_rollout_states
from ingestion.stats import IngestStats
from tests.collect_toy import FIX, READY, toy_instance
from tests.test_collect import CALC, FakeWorkspace, config
from tests.vllm_server import QWEN_EOS, VLLMConfig, VLLMServer, model_turn, qwen_tokenizer

SPEC = load_agent_spec()
SHAPES = [("0.10", "hermes"), ("0.10", "qwen3_coder"), ("0.33", "hermes"), ("0.33", "qwen3_coder")]


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


TWO = [bash("cat calc.py"), bash("git status --short")]
NOTE = {"name": "edit", "arguments": {"command": "create", "path": "notes.md", "file_text": "a\n\tb\n"}}
THREE = [*TWO, NOTE]
# Every call-making turn of the script makes `n` calls in parallel; then the fix, one call a turn.
SCRIPTS = {2: [TWO, [bash("grep -n 'def ' calc.py"), bash("python3 -V")], *FIX],
           3: [THREE, [*THREE[:2], bash("ls -la")], *FIX]}


def model(fmt: str, script: list[Any], content: str | None = None, rewrite: Any = None) -> Any:
    """The student: each step as its chat template renders it (thinking first, where Qwen3 thinks),
    then `rewrite(text)`: what a sampled model writes otherwise."""
    def policy(request: dict[str, Any]) -> Any:
        messages, tools = request["messages"], request.get("tools")
        if "connectivity check" in json.dumps(messages[:2]):
            return model_turn(messages, tools, fmt, None, READY)
        turn = sum(m["role"] == "assistant" for m in messages)
        step = script[turn] if turn < len(script) else "Done."
        reasoning = f"\nTurn {turn}: what next?\n" if fmt == "hermes" else None
        text = model_turn(messages, tools, fmt, step if isinstance(step, str) else content,
                          None if isinstance(step, str) else step, reasoning)
        return rewrite(text, turn) if rewrite else text
    return policy


def served(version: str, fmt: str) -> VLLMConfig:
    return VLLMConfig(version=version, tool_parser=fmt, reasoning_parser=fmt == "hermes", template="model")


def roll(tmp_path: Path, server: VLLMServer, max_turns: int = 12, **overrides: Any) -> tuple[Any, list[dict]]:
    path = tmp_path / "toy.rollout.jsonl"
    with RolloutWriter(path) as writer:
        student = Student(config(tmp_path, server.url, **overrides), think_tags=SPEC.think_tags)
        result = run_agent(student, FakeWorkspace({"calc.py": CALC}), SPEC,
                           toy_instance("toy__calc-1", "x")["problem_statement"], writer, max_turns,
                           threading.Event())
    return result, [json.loads(line) for line in path.read_text().splitlines()]


def extends(turns: list[dict]) -> list[bool]:
    pairs = zip(turns, turns[1:], strict=False)
    return [after["prompt_token_ids"][:len(prefix)] == prefix for before, after in pairs
            if (prefix := before["prompt_token_ids"] + before["completion_token_ids"])]


@pytest.mark.parametrize("calls", [2, 3])
@pytest.mark.parametrize("content", [None, "Let me look at both first."])
@pytest.mark.parametrize(("version", "fmt"), SHAPES)
def test_parallel_calls_keep_the_prefix(tmp_path: Path, version: str, fmt: str, content: str | None,
                                        calls: int) -> None:
    with VLLMServer(model(fmt, SCRIPTS[calls], content), served(version, fmt)) as server:
        result, turns = roll(tmp_path, server)
    assert (result.exit_status, result.turns) == ("submitted", 6), result.error
    assert [len(t["response"].get("tool_calls") or []) for t in turns] == [calls, calls, 1, 1, 1, 0]
    assert extends(turns) == [True] * 5
    assert [t["prefix_ok"] for t in turns] == [None, *[True] * 5] and result.prefix_breaks == 0
    assert all(t["completion_text"] is not None for t in turns)


# What a sampled model writes otherwise than its template, and where the parsed reply then broke.
OFF_TEMPLATE = {
    "blank line between calls": lambda text, turn: text.replace("</tool_call>\n<tool_call>",
                                                                "</tool_call>\n\n<tool_call>"),
    "text between calls": lambda text, turn: text.replace("</tool_call>\n<tool_call>",
                                                          "</tool_call>\nAnd the status:\n<tool_call>", 1),
    "text after the calls": lambda text, turn: text + "\n" if text.endswith("</tool_call>") else text,
}


@pytest.mark.parametrize("written", sorted(OFF_TEMPLATE))
@pytest.mark.parametrize(("version", "fmt"), SHAPES)
def test_calls_written_off_template_keep_the_prefix(tmp_path: Path, version: str, fmt: str,
                                                    written: str) -> None:
    policy = model(fmt, SCRIPTS[2], rewrite=OFF_TEMPLATE[written])
    with VLLMServer(policy, served(version, fmt)) as server:
        result, turns = roll(tmp_path, server)
    assert (result.exit_status, result.prefix_breaks) == ("submitted", 0)
    assert extends(turns) == [True] * 5


@pytest.mark.parametrize(("version", "fmt"), SHAPES)
def test_the_parsed_reply_breaks_right_after_the_first_call(tmp_path: Path, version: str, fmt: str) -> None:
    """The cause (#34): echoed parsed, two calls written with a blank line between them come back with
    the template's single newline; the first token that differs is the one after the first call."""
    echo = "field" if version == "0.33" else "inline"           # the parsed reply, reasoning as it goes back
    policy = model(fmt, SCRIPTS[2], rewrite=OFF_TEMPLATE["blank line between calls"])
    with VLLMServer(policy, served(version, fmt)) as server:
        result, turns = roll(tmp_path, server, reasoning_echo=echo)
    tokenizer = qwen_tokenizer()
    broken = turns[1]["prefix_break"]
    assert turns[1]["prefix_ok"] is False and broken["reason"] == "rerendered"
    written = turns[0]["completion_token_ids"]
    offset = broken["completion_offset"]
    assert tokenizer.token_text(written[offset - 1]) == "</tool_call>"          # right after the first call
    assert tokenizer.token_text(written[offset]) == "\n\n"                      # what the model wrote
    assert tokenizer.token_text(turns[1]["prompt_token_ids"][broken["token"]]) == "\n"   # what came back
    assert result.prefix_breaks == 2 and result.break_reasons == {"rerendered": 2}   # both 2-call turns


def split_one_token(text: str) -> list[int]:
    """The ids of `text` with one word sampled as two tokens: the same text, not the tokenizer's cut."""
    tokenizer = qwen_tokenizer()
    ids = tokenizer.encode(text)
    at = next(i for i, token in enumerate(ids) if tokenizer.token_text(token) == " status")
    return ids[:at] + tokenizer.encode(" st") + tokenizer.encode("atus") + ids[at + 1:]


@pytest.mark.parametrize("version", ["0.10", "0.33"])
def test_a_reply_sampled_as_other_tokens_is_a_break_explained_and_counted(tmp_path: Path,
                                                                          version: str) -> None:
    first = model("hermes", SCRIPTS[2])

    def policy(request: dict[str, Any]) -> Any:       # the first turn's reply sampled as other tokens
        opening = not any(m["role"] == "assistant" for m in request["messages"])
        probe = "connectivity" in json.dumps(request["messages"][:2])
        return split_one_token(first(request)) if opening and not probe else first(request)

    with VLLMServer(policy, served(version, "hermes")) as server:
        result, turns = roll(tmp_path, server)
    assert [t["prefix_ok"] for t in turns[:3]] == [None, False, True]
    assert turns[1]["prefix_break"]["reason"] == "retokenized"
    assert qwen_tokenizer().token_text(turns[0]["completion_token_ids"][
        turns[1]["prefix_break"]["completion_offset"]]) == " st"
    final = FinalRecord(exit_status="submitted", turns=6)
    outcome = final_outcome("toy__calc-1", "toy.rollout.jsonl", final, result.turns_with_token_ids, False,
                            result.prefix_breaks, dict(result.break_reasons))
    report = RunReport(run_id="r", student_model="student", student_url=server.url, evaluate=False,
                       started_at="t")
    report.add(outcome)
    assert report.prefix_breaks == {server.url: 1} and report.prefix_break_reasons == {"retokenized": 1}
    assert "prefix_breaks: retokenized=1" in report.summary()


@pytest.mark.parametrize("version", ["0.10", "0.33"])
def test_qwen3_dropping_earlier_reasoning_after_a_user_message_is_a_history_rewrite(tmp_path: Path,
                                                                                    version: str) -> None:
    """Qwen3's template keeps the reasoning of assistant turns after the last user message only: the
    agent's `user` message about a call it could not parse makes it drop the reasoning of every turn
    before, by design. The break is recorded as `history_rewritten`, at the first earlier think tag."""
    garbled = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}\n</tool_call>'
    script = [TWO, garbled, *FIX]
    policy = model("hermes", script, rewrite=lambda text, turn: text if turn != 1 else
                   text[:text.index("</think>") + len("</think>\n\n")] + garbled)
    with VLLMServer(policy, served(version, "hermes")) as server:
        result, turns = roll(tmp_path, server)
    assert turns[1]["observations"][0]["error"] == "unparsed_tool_call"
    assert [t["prefix_ok"] for t in turns[:4]] == [None, True, False, True]
    broken = turns[2]["prefix_break"]
    assert broken["reason"] == "history_rewritten" and broken["completion_offset"] is None
    was = turns[1]["prompt_token_ids"][broken["token"]:broken["token"] + 2]   # the earlier turn's think tag
    assert "<think>" in "".join(qwen_tokenizer().token_text(token) for token in was)
    assert result.break_reasons == {"history_rewritten": 1}


@pytest.mark.parametrize("version", ["0.10", "0.33"])
def test_an_empty_think_block_keeps_the_prefix_where_the_template_is_given_it_as_a_field(
        tmp_path: Path, version: str) -> None:
    """Qwen3 with nothing to think writes `<think>\\n\\n</think>\\n\\n`. Its template keeps an empty think
    block of an earlier turn when it gets the reasoning as a field (vLLM 0.33 hands it over) and drops
    one it finds inline in the content (all 0.10 can give it): there, by design, every turn breaks."""
    policy = model("hermes", SCRIPTS[2], rewrite=lambda text, turn: "<think>\n\n</think>\n\n"
                   + text.partition("</think>\n\n")[2])
    with VLLMServer(policy, served(version, "hermes")) as server:
        result, turns = roll(tmp_path, server)
    assert turns[0]["completion_text"].startswith("<think>\n\n</think>\n\n<tool_call>")
    if version == "0.33":
        assert result.prefix_breaks == 0 and turns[1]["messages"][2]["reasoning"] == "\n\n"
    else:
        assert result.prefix_breaks == 5 and result.break_reasons == {"rerendered": 5}
        assert {t["prefix_break"]["completion_offset"] for t in turns[1:]} == {0}   # the think tag


def test_ingestion_shows_teachers_the_parsed_replies(tmp_path: Path) -> None:
    """The history goes to the student as generated text; the states keep the parsed calls."""
    with VLLMServer(model("hermes", SCRIPTS[2]), served("0.33", "hermes")) as server:
        _, turns = roll(tmp_path, server)
    sent = turns[2]["messages"]
    assert sent[2]["content"] == turns[0]["completion_text"].partition("</think>")[2]
    assert "<tool_call>" in sent[2]["content"] and "tool_calls" not in sent[2]
    path = tmp_path / "toy.rollout.jsonl"
    header = RolloutHeader(rollout_id="toy__calc-1.r", run_id="r", instance_id="toy__calc-1", image="toy",
                           student_model="student", student_url=server.url, max_turns=12, agent_version=1,
                           tools=SPEC.tools, created_at="t")
    path.write_bytes(dump_record(header) + path.read_bytes()
                     + dump_record(FinalRecord(exit_status="submitted", turns=len(turns))))
    states = list(iter_rollout_states(path, IngestStats()))
    history = [m for m in states[2].messages if m["role"] == "assistant"]
    assert [[c["function"]["arguments"] for c in m["tool_calls"]] for m in history] == [
        [c["arguments"] for c in step] for step in SCRIPTS[2][:2]]
    assert all("<tool_call>" not in (m.get("content") or "") for m in history)
    assert states[2].messages[3:5] == [{"role": "tool", "tool_call_id": call["id"], "content": obs["output"]}
                                       for call, obs in zip(turns[0]["response"]["tool_calls"],
                                                            turns[0]["observations"], strict=True)]


def test_the_stand_in_speaks_qwen3s_tokens() -> None:
    tokenizer = qwen_tokenizer()
    assert tokenizer.encode("<|im_end|>") == [QWEN_EOS] and tokenizer.encode("<tool_call>") == [151657]
    assert tokenizer.encode("<think>") == [151667]
    assert tokenizer.decode(tokenizer.encode("añ 𝛑\n\n")) == "añ 𝛑\n\n"
