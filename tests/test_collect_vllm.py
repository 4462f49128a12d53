"""collect/ against a student server that answers like vLLM 0.10.2 and 0.33.0 (tests/vllm_server.py).

One test per way a real vLLM used to degrade rollouts silently (issue #15, items 1-8), each through the
real openai client and HTTP, with both versions where their answers differ; the agent works in an
in-memory workspace (tests/test_collect.py's), the CLI runs as a subprocess (no docker: the start-up
probe comes before it).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from collect.agent import run_agent
from collect.config import CollectError, load_agent_spec
from collect.probe import probe
from collect.records import RolloutWriter
from collect.student import Backend, Student, StudentError
from tests.collect_toy import toy_instance, toy_policy
from tests.llm_server import Reply, error_body
from tests.test_collect import CALC, FakeWorkspace, config
from tests.vllm_server import EOS, VLLMConfig, VLLMServer, render, validation_error_010

ROOT = Path(__file__).resolve().parents[1]
SPEC = load_agent_spec()
VERSIONS = ["0.10", "0.33"]


def roll(tmp_path: Path, server: VLLMServer, script: str, max_turns: int = 12,
         **overrides: Any) -> tuple[Any, list[dict], FakeWorkspace]:
    workspace = FakeWorkspace({"calc.py": CALC})
    path = tmp_path / f"{script}.rollout.jsonl"
    with RolloutWriter(path) as writer:
        student = Student(config(tmp_path, server.url, **overrides), think_tags=SPEC.think_tags)
        result = run_agent(student, workspace, SPEC, toy_instance("toy__calc-1", script)["problem_statement"],
                           writer, max_turns, threading.Event())
    return result, [json.loads(line) for line in path.read_text().splitlines()], workspace


def chat_requests(server: VLLMServer) -> list[dict]:
    return [r for r in server.requests if "messages" in r]


# --- the shapes as recorded ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "hex_digits"), [("0.10", 32), ("0.33", 16)])
def test_vllm_shapes_are_recorded_as_sent(tmp_path: Path, version: str, hex_digits: int) -> None:
    plain = VLLMConfig(version=version, reasoning_parser=False)
    with VLLMServer(toy_policy(reasoning=False), plain) as server:
        result, turns, _ = roll(tmp_path, server, "fix")
    first = turns[0]
    assert first["response"]["content"] is None                      # null beside the tool calls
    assert re.fullmatch(f"chatcmpl-tool-[0-9a-f]{{{hex_digits}}}", first["response"]["tool_calls"][0]["id"])
    assert first["completion_token_ids"][-1] == EOS and first["finish_reason"] == "tool_calls"
    assert first["usage"]["prompt_tokens"] == len(first["prompt_token_ids"])
    assert turns[-1]["finish_reason"] == "stop" and (result.exit_status, result.turns) == ("submitted", 4)


def test_a_server_that_ignores_return_token_ids_records_none(tmp_path: Path) -> None:
    """vLLM < 0.10.2 does not know `return_token_ids`: it ignores it (extra fields are only logged)."""
    with VLLMServer(toy_policy(), VLLMConfig(token_ids=False)) as server:
        result, turns, _ = roll(tmp_path, server, "fix")
    assert (result.exit_status, result.turns_with_token_ids) == ("submitted", 0)
    assert all(t["prompt_token_ids"] is None and t["completion_token_ids"] is None and t["logprobs"]
               for t in turns)
    assert all(r["return_token_ids"] is True for r in chat_requests(server))   # still asked: not refused


# --- 1. a tool call the parser could not read -------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("fmt", "script"), [("hermes", "garbled"), ("qwen3_coder", "garbled_xml")])
def test_an_unparsed_tool_call_is_an_error_observation_and_the_rollout_goes_on(
        tmp_path: Path, version: str, fmt: str, script: str) -> None:
    with VLLMServer(toy_policy(fmt), VLLMConfig(version=version, tool_parser=fmt)) as server:
        result, turns, workspace = roll(tmp_path, server, script)
    first = turns[0]
    assert "tool_calls" not in first["response"] and "<tool_call>" in first["response"]["content"]
    [observation] = first["observations"]
    assert (observation["error"], observation["tool_call_id"]) == ("unparsed_tool_call", None)
    assert turns[1]["messages"][-1] == {"role": "user", "content": observation["output"]}
    assert "could not be parsed" in observation["output"]
    assert (result.exit_status, result.turns) == ("submitted", 5)     # the garbled turn, then the fix
    assert "return a + b" in workspace.files["calc.py"]


# --- 2. a reply cut at max_tokens -------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("fmt", ["hermes", "qwen3_coder"])
def test_a_reply_cut_at_max_tokens_is_never_submitted(tmp_path: Path, version: str, fmt: str) -> None:
    create = {"command": "create", "path": "big.py", "file_text": "x" * 400}
    long_edit = [[{"name": "edit", "arguments": create}], "Done."]
    policy = toy_policy(fmt, reasoning=False, scripts={"long": long_edit})
    with VLLMServer(policy, VLLMConfig(version=version, tool_parser=fmt)) as server:
        result, turns, workspace = roll(tmp_path, server, "long", max_tokens=60)
    cut = turns[0]
    assert cut["usage"]["completion_tokens"] == 60 and cut["completion_token_ids"][-1] != EOS
    # 0.10 with the lenient XML parser reports the half call as `tool_calls`; the token count gives it away
    expected = "tool_calls" if (version, fmt) == ("0.10", "qwen3_coder") else "length"
    assert cut["finish_reason"] == expected
    assert [o["error"] for o in cut["observations"]] == ["truncated_reply"]
    assert "big.py" not in workspace.files                         # a cut call is never run
    assert (result.exit_status, result.turns) == ("submitted", 2)   # submitted by the next, whole reply
    assert turns[1]["finish_reason"] == "stop" and turns[1]["completion_token_ids"][-1] == EOS


# --- 3. a server without --enable-auto-tool-choice --------------------------------------------------------

def cli(tmp_path: Path, url: str, *extra: str, rows: list[Any] | None = None) -> subprocess.CompletedProcess:
    instances = tmp_path / "instances.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in rows or [toy_instance("toy__calc-1", "fix")]))
    argv = [sys.executable, "-m", "collect.run", "--instances", str(instances), "--student-url", url,
            "--student-model", "student", "--out", str(tmp_path / "out"), *extra]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_server_without_auto_tool_choice_stops_the_run_in_one_line(tmp_path: Path, version: str) -> None:
    with VLLMServer(toy_policy(), VLLMConfig(version=version, tool_parser=None)) as server:
        done = cli(tmp_path, server.url)
        answers = list(server.requests)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("collect.run: error: the student server at ")
    assert "--enable-auto-tool-choice --tool-call-parser" in done.stderr
    why = "does not parse tool calls" if version == "0.10" else "answered a tool call as text (<tool_call>)"
    assert why in done.stderr
    assert not (tmp_path / "out").exists()                         # no rollout, no report: nothing counted
    assert len(answers) == 1                                       # one probe request, then nothing


def test_a_probe_reply_cut_inside_its_call_proves_nothing_of_the_server(tmp_path: Path) -> None:
    """A small model at a short --max-tokens stops inside its `<tool_call>` (SmolLM2 at 96 tokens did, on
    vLLM with the right parser): no parser reads an unfinished call, so the run goes on, unverified; the same
    server's finished call as text still stops the run."""
    with VLLMServer(toy_policy(), VLLMConfig(version="0.33", tool_parser=None)) as server:
        backend = Backend(server.url, "EMPTY")
        info = probe(backend, "student", SPEC, {"max_tokens": 12})
        with pytest.raises(CollectError, match="answered a tool call as text"):
            probe(backend, "student", SPEC, {"max_tokens": 40})
    assert info.tool_calls == "not_called"


def test_a_probe_reply_of_markup_no_parser_reads_proves_nothing_of_the_server(tmp_path: Path) -> None:
    """A trained student that writes `<tool_call>` and no call (#57's bench: SmolLM2 after two DPO rounds,
    `<tool_call>bash rmash cmdcatbash…`) on a server with the right parser: the parser leaves it as text,
    which says nothing of the server, so the run goes on, unverified."""
    junk = "<tool_call>bash rmash cmdcatbash<tool_call>bash filterbash"
    with VLLMServer(lambda request: junk, VLLMConfig(version="0.33")) as server:
        info = probe(Backend(server.url, "EMPTY"), "student", SPEC, {"max_tokens": 64})
    assert info.tool_calls == "not_called"


def test_the_probe_reads_the_context_and_refuses_a_model_the_server_does_not_serve(tmp_path: Path) -> None:
    with VLLMServer(toy_policy(), VLLMConfig(max_model_len=4096)) as server:
        info = probe(Backend(server.url, "EMPTY"), "student", SPEC, {})
        done = cli(tmp_path, server.url, "--student-model", "other")
    assert (info.max_model_len, info.tool_calls, info.token_ids, info.reasoning_field) == (
        4096, "parsed", True, "reasoning")
    assert done.returncode == 2 and "serves student, not other (--student-model)" in done.stderr


# --- 4. reasoning, read under both names and echoed back where the template reads it -----------------------

# vLLM 0.10.2 keeps the "\n\n" its parsers leave between `</think>` and `<tool_call>` as content; 0.33.0 drops
# whitespace-only content beside calls (parser/abstract_parser.py); a server that keeps it answering
# `reasoning` (a tool parser run alone, as the releases between did) is the case that broke 7 of 11 turns.
SHAPES = [("0.10", "hermes", None), ("0.10", "qwen3_coder", None), ("0.33", "hermes", None),
          ("0.33", "qwen3_coder", None), ("0.33", "hermes", True), ("0.33", "qwen3_coder", True)]


def no_detokenize(request: dict) -> Reply | None:
    """A server without /detokenize (a proxy in front of vLLM): 404 there, vLLM's answer elsewhere."""
    return Reply({"detail": "Not Found"}, status=404) if "tokens" in request else None


@pytest.mark.parametrize(("version", "fmt", "keeps_blank"), SHAPES)
def test_replies_go_back_as_generated_so_each_prompt_extends_the_last(
        tmp_path: Path, version: str, fmt: str, keeps_blank: bool | None) -> None:
    shape = VLLMConfig(version=version, tool_parser=fmt, keeps_blank_content=keeps_blank)
    with VLLMServer(toy_policy(fmt=fmt), shape) as server:
        result, turns, _ = roll(tmp_path, server, "fix")
        sent = chat_requests(server)
    assert (result.exit_status, result.turns) == ("submitted", 4)
    field = "reasoning" if version == "0.33" else "reasoning_content"
    assert {t["reasoning_field"] for t in turns} == {field}
    assert turns[0]["reasoning"] == "\nTurn 0: what next?\n"
    # The reply goes back whole, as the model wrote it: markup and all, its reasoning inline where the
    # server reads none (0.10), in the field where it does (0.33).
    generated = server.policy(sent[0])
    assert turns[0]["completion_text"] == generated
    thought, _, rest = generated.partition("</think>")
    assert sent[1]["messages"][2] == ({"role": "assistant", "content": generated} if version == "0.10" else
                                      {"role": "assistant", "content": rest, "reasoning": thought[7:]})
    for before, after in zip(turns, turns[1:], strict=False):
        prefix = before["prompt_token_ids"] + before["completion_token_ids"]
        assert after["prompt_token_ids"][:len(prefix)] == prefix
    assert [t["prefix_ok"] for t in turns] == [None, True, True, True] and result.prefix_breaks == 0
    assert all(t["prefix_break"] is None for t in turns)
    assert all(len(t["logprobs"]) == len(t["completion_token_ids"]) for t in turns)


@pytest.mark.parametrize(("version", "fmt", "keeps_blank"), SHAPES)
def test_without_detokenize_reasoning_goes_back_where_the_template_reads_it(
        tmp_path: Path, version: str, fmt: str, keeps_blank: bool | None) -> None:
    shape = VLLMConfig(version=version, tool_parser=fmt, keeps_blank_content=keeps_blank)
    with VLLMServer(toy_policy(fmt=fmt), shape, intercept=no_detokenize) as server:
        result, turns, _ = roll(tmp_path, server, "fix")
        sent = chat_requests(server)
    assert turns[0]["completion_text"] is None and len(server.detokenized) == 1   # asked once, then never
    blank = version == "0.10" or keeps_blank
    assert turns[0]["response"]["content"] == ("\n\n" if blank else None)     # as the server answered
    echoed = sent[1]["messages"][2]
    if version == "0.33":          # 0.12+ hands `reasoning` to the chat template
        # Whitespace beside calls goes back empty: Qwen3's template would add a "\n" for "\n\n".
        assert echoed["reasoning"] == "\nTurn 0: what next?\n"
        assert echoed["content"] == ("" if blank else None)
    else:                          # 0.10 drops request reasoning: it goes back inline, as generated
        assert "reasoning" not in echoed and "reasoning_content" not in echoed
        assert echoed["content"] == "<think>\nTurn 0: what next?\n</think>\n\n"   # the template lstrips it
    assert [t["prefix_ok"] for t in turns] == [None, True, True, True] and result.prefix_breaks == 0


def test_the_template_renders_whitespace_content_beside_calls_as_qwen3_does() -> None:
    # What the test above guards against: "\n\n" echoed as it came renders a newline the model never wrote.
    call = {"id": "c", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    def prompt(content: str) -> str:
        message = {"role": "assistant", "content": content, "reasoning": "r", "tool_calls": [call]}
        return render([{"role": "user", "content": "hi"}, message], None, "0.33", "hermes")
    assert prompt("\n\n").replace("</think>\n\n\n<tool_call>", "</think>\n\n<tool_call>") == prompt("")
    assert "</think>\n\n\n<tool_call>" in prompt("\n\n")


@pytest.mark.parametrize("version", VERSIONS)
def test_reasoning_not_echoed_breaks_the_prefix(tmp_path: Path, version: str) -> None:
    with VLLMServer(toy_policy(), VLLMConfig(version=version)) as server:
        result, turns, _ = roll(tmp_path, server, "fix", reasoning_echo="none")
    prefix = turns[0]["prompt_token_ids"] + turns[0]["completion_token_ids"]
    assert turns[1]["prompt_token_ids"][:len(prefix)] != prefix    # what the test above guards against
    assert turns[1]["prefix_ok"] is False and result.prefix_breaks == len(turns) - 1
    # explained: the reply went back without its reasoning, so the template wrote it otherwise
    assert {t["prefix_break"]["reason"] for t in turns[1:]} == {"rerendered"}
    assert turns[1]["prefix_break"]["completion_offset"] == 0       # the think tag the model wrote first


# --- 5. the token extension: dropped only on the unsupported-field error, per server, reported ------------

def test_a_400_mentioning_logprobs_keeps_the_extension(tmp_path: Path) -> None:
    def once_invalid(request: dict) -> Reply | None:
        return validation_error_010(request, "bad") if "[script: nofix]" in json.dumps(request) else None

    with VLLMServer(toy_policy(), VLLMConfig(version="0.10"), intercept=once_invalid) as server:
        backend = Backend(server.url, "EMPTY")
        student = Student(config(tmp_path, server.url), backend)
        with pytest.raises(StudentError, match="rejected the request: HTTP 400: 1 validation error"):
            student.complete([{"role": "user", "content": "[script: nofix]"}], SPEC.tools)
        reply = student.complete([{"role": "user", "content": "[script: fix]"}], SPEC.tools)
    refusal = validation_error_010(server.requests[0], "bad").body["error"]["message"]
    assert "'logprobs': True" in refusal and "'return_token_ids': True" in refusal   # it names them both
    assert backend.extension is True and backend.dropped is None
    assert reply.completion_token_ids and server.requests[-1]["return_token_ids"] is True


def test_an_unrecognized_extension_field_drops_it_for_that_server_only(tmp_path: Path) -> None:
    def openai_like(request: dict) -> Reply | None:
        if "return_token_ids" in request:
            return Reply(error_body("Unrecognized request argument supplied: return_token_ids",
                                    "invalid_request_error"), status=400)
        return None

    with VLLMServer(toy_policy(), intercept=openai_like) as strict, VLLMServer(toy_policy()) as plain:
        one, two = Backend(strict.url, "EMPTY"), Backend(plain.url, "EMPTY")
        request = {"model": "student", "messages": [{"role": "user", "content": "[script: fix]"}],
                   "tools": SPEC.tools}
        replies = [backend.send(request) for backend in (one, two, one)]
    assert [r.completion_token_ids is not None for r in replies] == [False, True, False]
    assert one.dropped == "HTTP 400: Unrecognized request argument supplied: return_token_ids"
    assert (one.extension, two.extension, two.dropped) == (False, True, None)
    assert len(strict.requests) == 3                    # refused once, then asked plainly for good


# --- 6. context overflow ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_a_context_overflow_ends_the_rollout_as_context_overflow(tmp_path: Path, version: str) -> None:
    with VLLMServer(toy_policy(reasoning=False), VLLMConfig(version=version, max_model_len=1500)) as server:
        result, turns, workspace = roll(tmp_path, server, "overflow", max_turns=40)
        last = server.requests[-1]
    assert result.exit_status == "context_overflow", result.error
    assert "maximum context length is 1500 tokens" in result.error
    assert "return a + b" in workspace.files["calc.py"] and 3 < result.turns == len(turns) < 40
    assert len(chat_requests(server)) == result.turns + 1           # the last one no longer fit
    assert last["messages"][:len(turns[-1]["messages"])] == turns[-1]["messages"]


# --- 7. sampling and logprobs mode ------------------------------------------------------------------------

def test_temperature_and_top_p_are_sent_and_recorded(tmp_path: Path) -> None:
    with VLLMServer(toy_policy()) as server:
        student = Student(config(tmp_path, server.url, temperature=0.7, top_p=0.95, max_tokens=512,
                                 logprobs_mode="processed_logprobs"))
        student.complete([{"role": "user", "content": "[script: fix]"}], SPEC.tools)
    sent = server.requests[0]
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"]) == (0.7, 0.95, 512)
    assert student.sampling == {"temperature": 0.7, "top_p": 0.95, "max_tokens": 512}


# --- 8. the request timeout, retries, signals -------------------------------------------------------------

def test_a_hung_server_costs_one_request_timeout_and_no_retry(tmp_path: Path) -> None:
    with VLLMServer(toy_policy(), intercept=lambda request: Reply({}, delay=5)) as server:
        student = Student(config(tmp_path, server.url, request_timeout=0.5))
        with pytest.raises(StudentError, match=r"did not answer within 0.5 s \(--request-timeout\)"):
            student.complete([{"role": "user", "content": "x"}], SPEC.tools)
        assert len(server.requests) == 1


def test_a_busy_server_is_retried_after_its_retry_after(tmp_path: Path) -> None:
    busy = iter([Reply(error_body("overloaded"), status=503, headers={"retry-after": "0"})] * 2)
    with VLLMServer(toy_policy(), intercept=lambda request: next(busy, None)) as server:
        reply = Student(config(tmp_path, server.url)).complete([{"role": "user", "content": "[script: fix]"}],
                                                                SPEC.tools)
    assert len(server.requests) == 3 and reply.tool_calls


def test_sigint_stops_a_run_started_in_the_background_by_a_script(tmp_path: Path) -> None:
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps(toy_instance("toy__calc-1", "fix")) + "\n")
    with VLLMServer(toy_policy(), intercept=lambda request: Reply({}, delay=60)) as server:
        run = (f"{sys.executable} -m collect.run --instances {instances} --student-url {server.url} "
               f"--student-model student --out {tmp_path / 'out'}")
        # A non-interactive shell starts background jobs with SIGINT ignored; Python alone keeps it so.
        script = f"{run} & echo $! > {tmp_path / 'pid'}; wait $!"
        process = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stderr=subprocess.PIPE, text=True)
        while not server.requests:                     # the probe is waiting for the hung server
            threading.Event().wait(0.1)
        os.kill(int((tmp_path / "pid").read_text()), signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "collect.run: interrupted"
