"""collect/ without docker: the student client, instance checks, tools, the agent loop, the CLI's edges.

The agent runs against a real loopback OpenAI server (tests/llm_server.py) and an in-memory workspace;
tests/test_collect_docker.py runs the same loop in real containers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from collect.agent import run_agent
from collect.config import CollectConfig, CollectError, load_agent_spec
from collect.instances import check_instance, image_name, load_instances
from collect.records import RolloutWriter
from collect.reply import BadReply, parse_completion
from collect.runtime import CommandResult, clip
from collect.student import Student, StudentError
from collect.tools import execute
from tests.collect_toy import scripted_student, toy_instance, vllm_body
from tests.llm_server import LLMServer, Reply, chat_completion

ROOT = Path(__file__).resolve().parents[1]
CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
NONE3 = (None, None, None)


class FakeWorkspace:
    """Files in a dict, commands answered with a canned line: the tools' contract without a container."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = dict(files)
        self.commands: list[str] = []

    def run(self, command: str, timeout: int | None = None) -> CommandResult:
        self.commands.append(command)
        return CommandResult(output=f"ran: {command}\n", exit_code=0, timed_out=False, truncated=False)

    def read_file(self, path: str) -> tuple[bytes, Any]:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path].encode(), None

    def write_file(self, path: str, data: bytes, like: Any = None) -> None:
        self.files[path] = data.decode()


def config(tmp_path: Path, url: str, **overrides: Any) -> CollectConfig:
    fields = {"instances": tmp_path / "instances.jsonl", "student_url": url, "student_model": "student",
              "out": tmp_path / "out", **overrides}
    return CollectConfig(**fields)


def roll(tmp_path: Path, responder: Any, script: str = "fix", max_turns: int = 30) -> tuple[Any, ...]:
    workspace = FakeWorkspace({"calc.py": CALC})
    path = tmp_path / "x.rollout.jsonl"
    with LLMServer(responder) as server, RolloutWriter(path) as writer:
        student = Student(config(tmp_path, server.url))
        result = run_agent(student, workspace, load_agent_spec(), toy_instance("toy__calc-1", script)
                           ["problem_statement"], writer, max_turns, threading.Event())
    turns = [json.loads(line) for line in path.read_text().splitlines()]
    # a plain OpenAI-style server: the student's /detokenize requests get no text, and are left out
    return result, turns, [r for r in server.requests if "messages" in r], workspace


# --- the student's responses ----------------------------------------------------------------------------

def test_parse_completion_reads_vllm_token_ids_and_logprobs() -> None:
    reply = parse_completion(vllm_body([{"name": "bash", "arguments": {"command": "ls"}}], turn=1))
    assert reply.prompt_token_ids == list(range(1, 22))
    assert reply.completion_token_ids == [1010, 1011, 1012, 1013]
    assert reply.logprobs == [-0.125, -0.25, -0.375, -0.5]
    assert reply.tokens == ["<1010>", "<1011>", "<1012>", "<1013>"]
    assert reply.message["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "ls"}'}
    assert reply.finish_reason == "tool_calls"


@pytest.mark.parametrize("body, expected", [
    (chat_completion("hi"), NONE3),                                      # plain OpenAI
    (chat_completion("hi", prompt_token_ids="oops", choice_extra={"token_ids": [1, "x"]}), NONE3),
    (chat_completion("hi", choice_extra={"logprobs": {"content": None}}), NONE3),
])
def test_parse_completion_without_the_extension_records_none(body: dict, expected: tuple) -> None:
    reply = parse_completion(body)
    assert (reply.prompt_token_ids, reply.completion_token_ids, reply.logprobs) == expected
    assert reply.message == {"role": "assistant", "content": "hi"}


def test_parse_completion_keeps_reasoning_and_encodes_object_arguments() -> None:
    body = chat_completion("x")
    body["choices"][0]["message"].update(reasoning_content="think", tool_calls=[
        {"type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}])
    reply = parse_completion(body)
    assert reply.reasoning == "think"
    assert reply.message["tool_calls"] == [{"id": "call_0", "type": "function",
                                            "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]


@pytest.mark.parametrize("body", [{}, {"choices": []}, {"choices": [{"message": None}]}, {"error": "x"}])
def test_parse_completion_rejects_a_response_without_a_message(body: dict) -> None:
    with pytest.raises(BadReply, match="no choice"):
        parse_completion(body)


# --- instances --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("row, evaluate, problem", [
    ({"instance_id": "a__b-1", "problem_statement": "x"}, False, None),
    ({"instance_id": "a__b-1", "problem_statement": ""}, False, "missing field problem_statement"),
    ({"problem_statement": "x"}, False, "missing field instance_id"),
    ({"instance_id": "a b", "problem_statement": "x"}, False, "instance_id 'a b' is not a plain name"),
    ({"instance_id": "../x", "problem_statement": "x"}, False, "instance_id '../x' is not a plain name"),
    (["not", "a", "dict"], False, "row is not a JSON object"),
    ({"_line": 3, "_error": "invalid JSON"}, False, "line 3: invalid JSON"),
    ({"instance_id": "a__b-1", "problem_statement": "x"}, True,
     "missing fields repo, version, FAIL_TO_PASS, PASS_TO_PASS, eval_script, log_parser "
     "(needed by --evaluate)"),
    (toy_instance("toy__calc-1", "fix"), True, None),
])
def test_check_instance(row: Any, evaluate: bool, problem: str | None) -> None:
    assert check_instance(row, evaluate) == problem


@pytest.mark.parametrize("instance_id, namespace, tag, image", [
    ("astropy__astropy-12907", "swebench", "latest",
     "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"),
    ("django__django-11099", "local", "v1", "local/sweb.eval.x86_64.django_1776_django-11099:v1"),
    ("Org__Repo-7", "swebench", "latest", "swebench/sweb.eval.x86_64.org_1776_repo-7:latest"),
])
def test_image_name(instance_id: str, namespace: str, tag: str, image: str) -> None:
    assert image_name(instance_id, namespace, tag) == image


def test_load_instances_reads_the_shared_swebench_samples(swebench_samples: Path) -> None:
    rows = load_instances(swebench_samples)
    assert [row["instance_id"] for row in rows][:2] == ["astropy__astropy-12907", "astropy__astropy-13033"]
    assert all(check_instance(row, evaluate=False) is None for row in rows)
    # swebench>=5 grades with the row's own eval_script, which these older rows lack
    assert check_instance(rows[0], evaluate=True) == (
        "missing fields eval_script, log_parser (needed by --evaluate)")


def test_load_instances_keeps_a_bad_line_for_its_own_error(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"instance_id": "a__b-1", "problem_statement": "x"}\n{"instance_id": \n\n')
    rows = load_instances(path)
    assert [check_instance(row, False) for row in rows] == [None, "line 2: invalid JSON"]
    (tmp_path / "rows.json").write_text(json.dumps([{"instance_id": "a__b-1"}]))
    assert load_instances(tmp_path / "rows.json") == [{"instance_id": "a__b-1"}]


@pytest.mark.parametrize("text, message", [("", "holds no instances"), ("[1, ", "is not valid JSON")])
def test_load_instances_refuses_an_unusable_file(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "rows.jsonl").write_text(text)
    with pytest.raises(CollectError, match=message):
        load_instances(tmp_path / "rows.jsonl")
    with pytest.raises(CollectError, match="cannot read"):
        load_instances(tmp_path / "missing.jsonl")


# --- tools -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, arguments, output", [
    ("bash", '{"command": "ls"}', "ran: ls\n[exit code: 0]"),
    ("bash", '{"command": ', "error: arguments are not valid JSON: Expecting value at char 12"),
    ("bash", '{"cmd": "ls"}', "error: `command` is required and must be a string"),
    ("python", "{}", "error: unknown tool 'python'; the tools are bash, edit"),
    ("edit", '{"command": "str_replace", "path": "calc.py", "old_str": "return a - b", "new_str": "x"}',
     "error: old_str occurs 2 times; include more context to make it unique"),
    ("edit", '{"command": "str_replace", "path": "nope.py", "old_str": "a", "new_str": "b"}',
     "error: nope.py does not exist"),
    ("edit", '{"command": "view", "path": "calc.py"}',
     "error: unknown command 'view'; use create or str_replace"),
    ("edit", '{"command": "create", "path": "new.py", "file_text": "x = 1\\n"}', "Wrote new.py."),
])
def test_execute_turns_every_call_into_an_observation(name: str, arguments: str, output: str) -> None:
    workspace = FakeWorkspace({"calc.py": "return a - b\nreturn a - b\n"})
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    assert execute(workspace, call).output == output


def test_clip_keeps_head_and_tail() -> None:
    assert clip(b"head", b"tail", 1000) == ("head\n[... 992 bytes cut ...]\ntail", True)
    assert clip("é".encode()[:1], b"", 1) == ("\ufffd", False)


# --- the agent loop ----------------------------------------------------------------------------------------

def test_agent_records_every_turn_with_token_ids_and_logprobs(tmp_path: Path) -> None:
    result, turns, requests, workspace = roll(tmp_path, scripted_student)
    assert (result.exit_status, result.turns, result.turns_with_token_ids) == ("submitted", 4, 4)
    assert "return a + b" in workspace.files["calc.py"]
    assert [t["turn"] for t in turns] == [0, 1, 2, 3]
    assert all(r["logprobs"] is True and r["return_token_ids"] is True for r in requests)
    assert [len(t["messages"]) for t in turns] == [2, 4, 6, 8]
    assert turns[1]["messages"][2]["tool_calls"][0]["function"]["name"] == "bash"
    assert turns[1]["messages"][3] == {"role": "tool", "tool_call_id": "call_0_0",
                                       "content": "ran: cat calc.py\n[exit code: 0]"}
    assert turns[2]["completion_token_ids"] == [1020, 1021, 1022, 1023, 1024]
    assert turns[2]["prompt_token_ids"] == list(range(1, 23))
    assert turns[2]["logprobs"] == [-0.125, -0.25, -0.375, -0.5, -0.625]
    assert turns[3]["response"] == {"role": "assistant", "content": "add() subtracted; it adds now."}
    assert requests[0]["tools"] == load_agent_spec().tools


def test_agent_runs_against_a_server_that_rejects_the_extension(tmp_path: Path) -> None:
    def strict(request: dict) -> Reply:
        if "return_token_ids" in request or "logprobs" in request:
            return Reply({"error": {"message": "Unrecognized request argument supplied: return_token_ids"}},
                         status=400)
        return scripted_student(request)

    result, turns, requests, _ = roll(tmp_path, strict)
    assert (result.exit_status, result.turns, result.turns_with_token_ids) == ("submitted", 4, 0)
    assert all(t["prompt_token_ids"] is None and t["logprobs"] is None for t in turns)
    assert len(requests) == 5                      # one refusal, then four plain requests


def test_a_student_failing_midway_ends_the_rollout_with_its_turns_kept(tmp_path: Path) -> None:
    def flaky(request: dict) -> Reply:
        turn = sum(m["role"] == "assistant" for m in request["messages"])
        return scripted_student(request) if turn < 2 else Reply({"error": {"message": "boom"}}, status=400)

    result, turns, _, _ = roll(tmp_path, flaky)
    assert (result.exit_status, result.turns) == ("student_error", 2)
    assert "the student rejected the request" in result.error and "boom" in result.error
    assert len(turns) == 2


def test_an_unreachable_student_is_a_clear_error(tmp_path: Path) -> None:
    student = Student(config(tmp_path, "http://127.0.0.1:9/v1", request_timeout=5))
    with pytest.raises(StudentError, match="cannot reach the student at http://127.0.0.1:9/v1"):
        student.complete([{"role": "user", "content": "x"}], [])


def test_the_agent_stops_at_max_turns(tmp_path: Path) -> None:
    result, turns, _, _ = roll(tmp_path, scripted_student, max_turns=2)
    assert (result.exit_status, result.turns, len(turns)) == ("max_turns", 2, 2)


# --- the CLI ---------------------------------------------------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collect.run", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_help_imports_nothing_heavy() -> None:
    done = cli("--help")
    assert done.returncode == 0 and "--student-url" in done.stdout
    imported = subprocess.run([sys.executable, "-X", "importtime", "-m", "collect.run", "--help"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stderr
    modules = {line.rsplit("|", 1)[-1].strip() for line in imported.splitlines()}
    assert "argparse" in modules and not modules & {"docker", "swebench", "litellm", "openai", "datasets"}


@pytest.mark.parametrize("args, message", [
    (["--instances", "/nonexistent.jsonl"], "collect.run: error: cannot read instances file /nonexistent"),
    (["--instances", "x", "--workers", "0"], "collect.run: error: --workers: Input should be greater"),
    (["--instances", "x", "--max-turns", "0"], "collect.run: error: --max-turns: Input should be greater"),
])
def test_user_errors_are_one_line(args: list[str], message: str) -> None:
    done = cli(*args, "--student-url", "http://127.0.0.1:9/v1", "--student-model", "m", "--out", "/tmp/x")
    assert done.returncode == 2
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1


def _report(**counts: Any) -> Any:
    from collect.report import RunReport

    return RunReport(run_id="r", student_model="m", student_url="u", evaluate=False, started_at="t", **counts)


@pytest.mark.parametrize(("counts", "allow_empty", "code", "said"), [
    # #47 item 5: every rollout overflowed at turn 0: no error kind, yet nothing was done
    ({"instances": 4, "rollouts": 4, "ok": 4, "exit_status": {"context_overflow": 4}}, False, 1,
     "4 rollouts: 4 context_overflow, 0 turns"),
    ({"instances": 4, "rollouts": 4, "ok": 4, "exit_status": {"context_overflow": 4}}, True, 0,
     "4 rollouts: 4 context_overflow, 0 turns"),
    ({"instances": 2, "rollouts": 2, "ok": 2, "turns": 5, "exit_status": {"submitted": 1, "max_turns": 1}},
     False, 0, "2 rollouts: 1 max_turns, 1 submitted, 5 turns"),
    ({"instances": 2, "errors": {"image_not_found": 2}}, True, 1, "2 instances: 0 rollouts, 0 turns"),
    ({"instances": 0}, False, 0, "0 instances: 0 rollouts, 0 turns"),
])
def test_the_summary_names_exit_statuses_and_an_empty_run_fails(
        counts: dict, allow_empty: bool, code: int, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    from collect.run import exit_code

    report = _report(**counts)
    assert said in report.summary()
    assert ("NO TURNS" in report.summary()) == (report.instances > 0 and report.turns == 0)
    assert exit_code(report, allow_empty) == code
    err = capsys.readouterr().err
    assert ("no rollout took a turn" in err) == (report.empty and not allow_empty)
