"""Pairs, export and pre-flight: rows survive Arrow exactly and render tool arguments as JSON objects."""

from __future__ import annotations

import json

import pytest

from consensus.canonical import canonical
from consensus.vote import vote
from ingestion.schema import Action, Proposal, ToolCall, TraceState
from replay.export.dataset import (
    ExportError,
    card_text,
    export_dataset,
    pair_features,
    split_by_trace,
    write_card,
)
from replay.export.pairs import PAIR_COLUMNS, build_pair
from replay.export.preflight import preflight
from tests.tiny_model import build_tokenizer

CWD = "/repo"
SECRET_THOUGHT = "private chain of thought"
TOOLS = [
    {"type": "function", "function": {"name": "Bash", "description": "Run a shell command.", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
        "required": ["command"]}}},
    {"type": "function", "function": {"name": "Read", "description": "Read a file.", "parameters": {
        "type": "object", "properties": {"file_path": {"type": "string"}, "offset": {"type": "integer"}},
        "required": ["file_path"]}}},
    {"type": "function", "function": {"name": "Edit", "description": "Replace text.", "parameters": {
        "type": "object", "properties": {"file_path": {"type": "string"}, "old_string": {"type": "string"},
                                         "new_string": {"type": "string"},
                                         "replace_all": {"type": "boolean"}}}}},
]


def tool_action(name: str, call_id: str = "call_1", content: str = "", **arguments) -> Action:
    return Action(content=content, tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)])


def assistant_call(call_id: str, name: str, **arguments) -> dict:
    function = {"name": name, "arguments": arguments}
    return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "type": "function",
                                                                "function": function}]}


def make_state(turn: int, student: Action, history: list[dict]) -> TraceState:
    messages = [{"role": "system", "content": f"You are a coding agent. cwd: {CWD}"},
                {"role": "user", "content": "The test in tests/test_a.py fails. Fix it."}, *history]
    return TraceState(state_id=f"claude_code:t1:{turn}", trace_id="t1", turn=turn, source="claude_code",
                      messages=messages, tools=TOOLS, student_action=student,
                      student_model="claude-sonnet-4-5-20250929", metadata={"cwd": CWD})


def teachers(*actions: Action) -> list[Proposal]:
    names = ["deepseek", "gpt-5", "qwen"]
    return [Proposal(state_id="s", teacher=names[i], model=names[i], action=a, cost_usd=0.01)
            for i, a in enumerate(actions)]


def sample_cases() -> list[tuple[TraceState, list[Proposal]]]:
    """States with tool calls in prompt, chosen and rejected, arguments of differing key sets and types."""
    ran = [assistant_call("toolu_1", "Bash", command="pytest -q", description="Run tests"),
           {"role": "tool", "tool_call_id": "toolu_1", "content": "F.\nAssertionError: 2 != 3"}]
    read = [*ran, assistant_call("toolu_2", "Read", file_path="/repo/tests/test_a.py", offset=1),
            {"role": "tool", "tool_call_id": "toolu_2", "content": "def test_a():\n    assert f() == 3\n"}]
    edit = tool_action("Edit", file_path="/repo/src/a.py", old_string="return 2", new_string="return 3")
    return [
        # Teachers read the test (absolute vs relative paths agree); the student deletes the build dir.
        (make_state(1, Action(content="Cleaning up.", thinking=SECRET_THOUGHT,
                              tool_calls=[ToolCall(id="toolu_9", name="Bash",
                                                   arguments={"command": "rm -rf build", "timeout": 600})]),
                    ran),
         teachers(tool_action("Read", file_path="tests/test_a.py"),
                  tool_action("Read", file_path="/repo/tests/test_a.py"),
                  tool_action("Bash", command="cat tests/test_a.py"))),
        # Teachers edit; the student answers in text.
        (make_state(2, Action(content="The test looks wrong; I stop here.", thinking=SECRET_THOUGHT), read),
         teachers(edit, edit, tool_action("Bash", command="git diff"))),
        # Teachers say it is done; the student edits again with nested, unicode arguments.
        (make_state(3, tool_action("Edit", "toolu_7", "Again.", file_path="src/a.py",
                                   old_string="ü = [1, {\"k\": 2}]", new_string="ü = []", replace_all=True),
                    [*read, {"role": "user", "content": "Thanks, that works."}]),
         teachers(Action(content="Done: the fix is in src/a.py."),
                  Action(content="done:  the fix is in src/a.py."), Action(content="Anything else?"))),
        # Two calls in one action.
        (make_state(4, tool_action("Bash", command="ls"), ran),
         teachers(*[Action(tool_calls=[ToolCall(id="a", name="Bash", arguments={"command": "git status"}),
                                       ToolCall(id="b", name="Read", arguments={"file_path": "src/a.py"})])]
                  * 2, tool_action("Bash", command="ls"))),
    ]


def pair_rows() -> list[dict]:
    rows = [build_pair(state, vote(props, CWD), props) for state, props in sample_cases()]
    assert all(rows)
    return rows  # type: ignore[return-value]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp("tok"))


# --- pairs ----------------------------------------------------------------------------------------

def test_pair_rows_have_the_trl_shape():
    for (state, _), row in zip(sample_cases(), pair_rows(), strict=True):
        assert tuple(row) == PAIR_COLUMNS
        assert row["prompt"] == state.messages and row["prompt"][0]["role"] == "system"
        assert [m["role"] for m in row["chosen"]] == ["assistant"] == [m["role"] for m in row["rejected"]]
        assert row["tools"] == TOOLS and row["cost_usd"] == pytest.approx(0.03)
        assert row["method"] == "vote" and row["teachers"] == ["deepseek", "gpt-5", "qwen"]
        assert row["votes"][0]["teachers"] == row["winner_teachers"]
        chosen, rejected = (Action(content=m["content"], tool_calls=[
            ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
            for c in m.get("tool_calls", [])]) for m in (row["chosen"][0], row["rejected"][0]))
        assert canonical(chosen, CWD) != canonical(rejected, CWD)
        assert SECRET_THOUGHT not in json.dumps(row)


def test_no_pair_when_student_agrees_or_teachers_abstain():
    state, props = sample_cases()[0]
    agreeing = state.model_copy(update={"student_action": tool_action("Read", file_path="./tests/test_a.py")})
    assert build_pair(agreeing, vote(props, CWD), props) is None
    split = teachers(tool_action("Bash", command="ls"), tool_action("Bash", command="pwd"))
    assert build_pair(state, vote(split, CWD), split) is None


def test_string_arguments_in_the_prompt_become_objects():
    state, props = sample_cases()[0]
    messages = [dict(m) for m in state.messages]
    messages[2] = {**messages[2], "tool_calls": [{"id": "toolu_1", "type": "function", "function": {
        "name": "Bash", "arguments": '{"command": "pytest -q"}'}}]}
    row = build_pair(state.model_copy(update={"messages": messages}), vote(props, CWD), props)
    assert row["prompt"][2]["tool_calls"][0]["function"]["arguments"] == {"command": "pytest -q"}
    assert isinstance(messages[2]["tool_calls"][0]["function"]["arguments"], str)  # input untouched


# --- export ---------------------------------------------------------------------------------------

def test_rows_survive_arrow_exactly(tmp_path):
    rows = pair_rows()
    dataset = export_dataset(rows, tmp_path)
    assert dataset.num_rows == len(rows) and tuple(dataset.column_names) == PAIR_COLUMNS
    # Exactly the dicts written: no merged keys, no `tool_calls: None` on user messages, objects stay objects.
    assert dataset.to_list() == rows
    assert "tool_calls" not in dataset[0]["prompt"][1] and "tool_call_id" not in dataset[0]["prompt"][2]
    assert dataset[2]["rejected"][0]["tool_calls"][0]["function"]["arguments"]["replace_all"] is True
    lines = (tmp_path / "pairs.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == rows


def test_export_replaces_atomically(tmp_path):
    export_dataset(pair_rows(), tmp_path)
    again = export_dataset(pair_rows()[:1], tmp_path)
    assert again.num_rows == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset", "pairs.jsonl"]


def test_export_empty_and_bad_rows(tmp_path):
    empty = export_dataset([], tmp_path / "empty")
    assert empty.num_rows == 0 and empty.features == pair_features()
    with pytest.raises(ExportError, match="missing columns \\['votes'\\]"):
        export_dataset([{k: v for k, v in pair_rows()[0].items() if k != "votes"}], tmp_path / "bad")


def test_write_card(tmp_path):
    from huggingface_hub import DatasetCard

    key = "sk-proj-" + "Abc123XyZ" * 5
    info = {"pairs": 4, "sources": ["Claude Code sessions (2 traces)"],
            "student_models": ["claude-sonnet-4-5"], "teachers": ["gpt-5", "deepseek"],
            "excluded_teachers": {"claude-opus": 12}, "method": "vote",
            "min_agreement": 0.5, "counts": {"states": 20, "agree": 6, "abstained": 10}, "cost_usd": 1.5,
            "license": "mit", "max_length": 8192, "splits": {"train": 3, "test": 1},
            "lengths": {"counted_with": "estimate",
                        **dict.fromkeys(("prompt", "chosen", "rejected", "total"), {"p50": 10, "p100": 20})},
            "templates": {"qwen3": {"rows": 4, "passed": 4, "pass_rate": 1.0, "problems": {},
                                    "source": "Qwen"},
                          "llama3.1": {"rows": 4, "passed": 1, "pass_rate": 0.25,
                                       "problems": {"template_error": 3}, "source": "vLLM"}},
            "ablation_of": "/home/me/runs/out",
            "command": f"python -m replay.run --source /home/me/.claude/projects --out /home/me/out "
                       f"--teachers gpt-5,local=openai/m@http://192.168.1.20:8000/v1 --cache=/tmp/c.sqlite "
                       f"--judge j=openai/j@https://llm.internal.example.com/v1 --note {key}"}
    text = write_card(tmp_path, info).read_text(encoding="utf-8")
    card = DatasetCard(text)  # the Hub's parser
    header = card.data.to_dict()
    assert header["license"] == "mit" and header["task_categories"] == ["text-generation"]
    assert "dpo" in header["tags"] and header["size_categories"] == ["n<1K"]
    assert header["configs"] == [{"config_name": "default", "data_files": [
        {"split": "train", "path": "dataset/train/data-*.arrow"},
        {"split": "test", "path": "dataset/test/data-*.arrow"}]}]
    for needle in ("gpt-5, deepseek", "claude-opus (12)", "| agree | 6 |", "1.5000 USD", "max_length=8192",
                   "| llama3.1 | 4 | 1 | 25.0% | template_error (3) |", "| total | 10 | 20 |",
                   "--source <path> --out <path> --teachers gpt-5,local=openai/m@<url> --cache=<path>",
                   "| `preflight` |", "| `trace_id` |"):
        assert needle in text, needle
    for leak in ("/home/me", "192.168", "internal.example", "/tmp/c.sqlite", key):
        assert leak not in text
    assert "license: unknown" in card_text({"pairs": 0})


def test_split_by_trace_keeps_traces_whole(tmp_path):
    from datasets import load_from_disk

    rows = []
    for number, trace in enumerate("aaabbbbccdeeeefgh"):
        rows.append({**pair_rows()[0], "trace_id": trace, "state_id": f"claude_code:{trace}:{number}"})
    dataset = export_dataset(rows, tmp_path, test_split=0.25)
    assert set(dataset) == {"train", "test"} and load_from_disk(str(tmp_path / "dataset"))["test"].num_rows
    train, test = set(dataset["train"]["trace_id"]), set(dataset["test"]["trace_id"])
    assert not train & test and train | test == set("abcdefgh")
    assert dataset["train"].num_rows + dataset["test"].num_rows == len(rows)
    assert 1 <= dataset["test"].num_rows <= 0.25 * len(rows)
    assert split_by_trace(list(reversed(rows)), 0.25)["test"] == list(reversed(dataset["test"].to_list()))
    lines = (tmp_path / "pairs.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["state_id"] for line in lines] == [r["state_id"] for r in rows]


# --- rendering and pre-flight -----------------------------------------------------------------------

QWEN25_STYLE = """{%- for message in messages %}<|im_start|>{{ message.role }}
{{ message.content }}{%- for tool_call in message.tool_calls | default([]) %}
{%- set tool_call = tool_call.function %}<tool_call>{"name": "{{ tool_call.name }}", "arguments": \
{{ tool_call.arguments | tojson }}}</tool_call>{%- endfor %}<|im_end|>
{% endfor %}"""


def test_loaded_arguments_render_as_json_objects(tmp_path, tokenizer):
    from datasets import load_from_disk

    export_dataset(pair_rows(), tmp_path)
    row = load_from_disk(str(tmp_path / "dataset"))[0]
    for template in (None, QWEN25_STYLE):  # ours, and a template that `tojson`s arguments unconditionally
        text = tokenizer.apply_chat_template(row["prompt"] + row["rejected"], tools=row["tools"],
                                             chat_template=template, tokenize=False)
        assert '"arguments": {"command": "pytest -q", "description": "Run tests"}' in text
        assert '"arguments": {"command": "rm -rf build", "timeout": 600}' in text
        assert '"arguments": "' not in text


def test_preflight_keeps_good_rows(tokenizer):
    rows = pair_rows()
    kept, dropped = preflight(rows, tokenizer, max_length=4096)
    assert kept == rows and not dropped


def test_preflight_drops_with_reasons(tokenizer):
    rows = pair_rows()
    _, dropped = preflight(rows, tokenizer, max_length=50)
    assert dropped == {"too_long": len(rows)}
    # A template whose generation prompt differs from how it renders the reply (a "thinking" opener).
    thinking = tokenizer.chat_template.replace("{{ '<|im_start|>assistant\\n' }}{% endif %}",
                                               "{{ '<|im_start|>assistant\\n<think>' }}{% endif %}")
    assert thinking != tokenizer.chat_template
    tokenizer_b = type(tokenizer)(tokenizer_object=tokenizer.backend_tokenizer, chat_template=thinking,
                                  eos_token="<|im_end|>", pad_token="<|endoftext|>")
    assert preflight(rows, tokenizer_b)[1] == {"prompt_not_prefix_of_chosen": len(rows)}
    no_tools = ("{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools') }}"
                "{% endif %}{{ m.content }}{% endfor %}")
    tokenizer_c = type(tokenizer)(tokenizer_object=tokenizer.backend_tokenizer, chat_template=no_tools)
    assert preflight(rows, tokenizer_c)[1] == {"template_error": len(rows)}


# --- flags ------------------------------------------------------------------------------------------

def test_bad_export_flags_are_one_line_before_any_call(tmp_path, capsys):
    from replay.run import main
    from tests.llm_server import LLMServer
    from tests.sessions import basic_session, write_session

    session = write_session(tmp_path / "s", basic_session())
    with LLMServer() as server:
        teachers = f"a=openai/a@{server.url}"
        code = main(["--source", str(session), "--out", str(tmp_path / "out"), "--teachers", teachers,
                     "--preflight-template", "qwen3,nowhere.jinja"])
        assert code == 2 and not server.requests
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --preflight-template nowhere.jinja: no such file") and "\n" not in err
    assert main(["--source", str(session), "--out", str(tmp_path / "dry"), "--dry-run", "--max-length", "512",
                 "--tokenizer", str(tmp_path / "no-tokenizer")]) == 2
    assert "tokenizer" in capsys.readouterr().err
    for flags in (["--test-split", "1.5"], ["--max-length", "0"]):
        with pytest.raises(SystemExit) as exit_:
            main(["--source", str(session), "--dry-run", *flags])
        assert exit_.value.code == 2
