"""Rows through real open-model chat templates (configs/chat_templates/, sources in templates.toml):
per-template pre-flight counts against a hand-check, and the ingestion fixes (#19 item 3) that make
Hermes, Gemma 3 and Qwen-style templates accept rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from consensus.result import ConsensusResult
from ingestion.options import IngestOptions
from ingestion.schema import Action
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from replay.export.pairs import pair_row
from replay.export.preflight import check_row, check_templates, preflight, row_problems
from replay.export.templates import ChatTemplate, TemplateError, load_template, named_template, shipped
from tests.sessions import assistant, text, tool_result, tool_use, user, write_session
from tests.test_budget import interrupted_session
from tests.tiny_model import build_tokenizer

TEMPLATES = ("qwen3", "llama3.1", "hermes", "gemma3")
SYSTEM = {"role": "system", "content": "You are a coding agent. cwd: /repo"}
TOOLS = [{"type": "function", "function": {"name": n, "description": f"{n} tool", "parameters": {
    "type": "object", "properties": {"arg": {"type": "string", "description": "the argument"}},
    "required": ["arg"]}}} for n in ("Bash", "Read")]


def call(call_id: str, name: str, arg: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": {"arg": arg}}}


def asst(content: str = "", *calls: dict) -> dict:
    return {"role": "assistant", "content": content, **({"tool_calls": list(calls)} if calls else {})}


def row(prompt: list[dict], chosen: dict, rejected: dict) -> dict:
    return {"prompt": [SYSTEM, *prompt], "chosen": [chosen], "rejected": [rejected], "tools": TOOLS}


TOOL_TURN = [{"role": "user", "content": "The test fails. Fix it."},
             asst("", call("c1", "Bash", "pytest -q")),
             {"role": "tool", "tool_call_id": "c1", "name": "Bash", "content": "F\nAssertionError: 2 != 3"}]
TALK = [{"role": "user", "content": "Fix the test."}, asst("Which file?"),
        {"role": "user", "content": "a.py"}]

# Five rows and, worked out by hand from each template's source, what each template makes of them.
HAND_CHECKED = [
    # a tool result in the prompt, one call chosen, text rejected
    (row(TOOL_TURN, asst("", call("c2", "Read", "a.py")), asst("Done.")),
     {"qwen3": [], "llama3.1": [], "hermes": [], "gemma3": ["template_error"]}),   # Gemma 3: tool role
    # two parallel calls chosen
    (row(TOOL_TURN, asst("", call("c2", "Read", "a.py"), call("c3", "Read", "b.py")), asst("Done.")),
     {"qwen3": [], "llama3.1": ["template_error"], "hermes": [], "gemma3": ["template_error"]}),
    # text only
    (row(TALK, asst("Reading a.py."), asst("I give up.")),
     {"qwen3": [], "llama3.1": [], "hermes": [], "gemma3": []}),
    # text beside a tool call: Llama 3.1 and Hermes render only the call, Gemma 3 only the text
    (row(TALK, asst("Let me check.", call("c4", "Bash", "cat a.py")), asst("No.")),
     {"qwen3": [], "llama3.1": ["content_not_rendered"], "hermes": ["content_not_rendered"],
      "gemma3": ["tool_calls_not_rendered"]}),
    # two different calls: a template without tools renders both as the same empty turn
    (row(TALK, asst("", call("c5", "Bash", "ls")), asst("", call("c6", "Bash", "pwd"))),
     {"qwen3": [], "llama3.1": [], "hermes": [],
      "gemma3": ["tool_calls_not_rendered", "chosen_equals_rejected"]}),
]


def test_the_shipped_templates_name_their_source() -> None:
    assert set(TEMPLATES) <= set(shipped())
    for name in TEMPLATES:
        entry = shipped()[name]
        assert entry["source"] and entry["license"] and entry["model"]
        assert "{%" in named_template(name).text


@pytest.mark.parametrize("name", TEMPLATES)
def test_per_template_counts_match_the_hand_check(name: str) -> None:
    rows = [r for r, _ in HAND_CHECKED]
    flagged, stats = check_templates(rows, [named_template(name)])
    assert [r["preflight"][name] for r in flagged] == [expected[name] for _, expected in HAND_CHECKED]
    passed = sum(not expected[name] for _, expected in HAND_CHECKED)
    assert stats[name]["passed"] == passed and stats[name]["rows"] == len(rows)
    assert "preflight" not in rows[0]  # inputs untouched


def test_template_errors_are_reported_with_their_message() -> None:
    codes, error = row_problems(HAND_CHECKED[1][0], named_template("llama3.1"))
    assert codes == ["template_error"] and "single tool-calls" in error


def test_a_template_is_a_name_a_file_or_a_tokenizer(tmp_path: Path) -> None:
    (tmp_path / "mine.jinja").write_text(named_template("qwen3").text, encoding="utf-8")
    assert load_template(str(tmp_path / "mine.jinja")).name == "mine"
    tokenizer_dir = tmp_path / "tok"
    build_tokenizer(tokenizer_dir)
    template = load_template(str(tokenizer_dir))
    assert template.tokenizer is not None and template.name == "tok"
    assert row_problems(HAND_CHECKED[0][0], template, max_length=20) == (["too_long"], None)
    with pytest.raises(TemplateError, match="no such file, and not a shipped template"):
        load_template(str(tmp_path / "missing.jinja"))


# --- the ingestion fixes, rendered ---------------------------------------------------------------------

def ingested_rows(path: Path) -> list[dict]:
    states = list(iter_states(path, IngestOptions(), IngestStats()))
    result = ConsensusResult(method="vote", reached=True, action=Action(content="Something else."))
    return [pair_row(state, result, []) for state in states]


def test_hermes_needs_the_tool_name_ingestion_now_writes(tmp_path: Path) -> None:
    rows = ingested_rows(write_session(tmp_path, interrupted_session()))
    hermes = named_template("hermes")
    assert all(row_problems(r, hermes)[1] is None for r in rows)
    nameless = {**rows[-1], "prompt": [{k: v for k, v in m.items() if k != "name"}
                                       for m in rows[-1]["prompt"]]}
    assert "require a 'name' key" in row_problems(nameless, hermes)[1]


def test_gemma3_needs_the_merged_user_turns(tmp_path: Path) -> None:
    records = [user("u0", None, "hello"), assistant("a0", "u0", "msg_0", text("Hi. What shall I do?")),
               user("u1", "a0", "[Request interrupted by user]"), user("u2", "u1", "list the files"),
               assistant("a1", "u2", "msg_1", text("Listing."))]
    rows = ingested_rows(write_session(tmp_path, records))
    gemma = named_template("gemma3")
    assert [row_problems(r, gemma)[0] for r in rows] == [[], []]
    prompt = rows[-1]["prompt"]
    assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]
    unmerged = {**rows[-1], "prompt": [*prompt[:3],
                                       {"role": "user", "content": "[Request interrupted by user]"},
                                       {"role": "user", "content": "list the files"}]}
    assert "must alternate" in row_problems(unmerged, gemma)[1]


def test_qwen_style_token_prefix_needs_the_blank_lines_stripped(tmp_path: Path) -> None:
    # The tiny tokenizer's template is Qwen2.5's ChatML (`'<|im_start|>assistant\\n' + content`); trained
    # on text with blank lines, its byte-level BPE merges newlines as real ones do, so a completion that
    # starts with blank lines is no token prefix of the prompt's.
    tokenizer = build_tokenizer(tmp_path / "tok", ["First part.\n\n\nSecond part.\n\nThird.\n"] * 50)
    records = [user("u0", None, "explain"),
               assistant("a0", "u0", "msg_0", text("\n\n\nIt parses the file.\n\n"))]
    rows = ingested_rows(write_session(tmp_path / "s", records))
    assert rows[0]["rejected"][0]["content"] == "It parses the file."
    assert check_row(rows[0], tokenizer) is None
    padded = {**rows[0], "rejected": [{"role": "assistant", "content": "\n\n\nIt parses the file."}]}
    assert check_row(padded, tokenizer) == "prompt_not_prefix_of_rejected"
    qwen3 = named_template("qwen3")
    assert all(row_problems(r, qwen3) == ([], None) for r in rows)


def test_qwen3_renders_every_ingested_row(tmp_path: Path) -> None:
    records = [user("u0", None, "run the tests"),
               assistant("a0", "u0", "msg_0", tool_use("toolu_0", "pytest")),
               user("r0", "a0", tool_result("toolu_0", "1 failed")),
               assistant("a1", "r0", "msg_1", {**tool_use("toolu_1", "cat a.py")}),
               user("r1", "a1", tool_result("toolu_1", "def f(): return 2")),
               assistant("a2", "r1", "msg_2", text("The bug is in f."))]
    rows = ingested_rows(write_session(tmp_path, records))
    flagged, stats = check_templates(rows, [named_template(n) for n in TEMPLATES])
    assert stats["qwen3"]["passed"] == len(rows) == 3
    # Gemma 3 cannot express a tool turn; every row after the first call says so.
    assert [r["preflight"]["gemma3"] for r in flagged][1:] == [["template_error"]] * 2


def test_chat_template_objects_render_like_transformers() -> None:
    template = ChatTemplate(name="t", special={"bos_token": "<s>"},
                            text="{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}")
    assert template.render([{"role": "user", "content": "hi"}], None) == "<s>hi"


def test_the_training_tokenizer_drops_what_it_cannot_train_on(tmp_path: Path) -> None:
    from replay.export.checks import check_rows
    from replay.options import ExportOptions

    rows = [{**r, "preflight": {}} for r, _ in HAND_CHECKED]
    tokenizer = build_tokenizer(tmp_path / "tok")
    tokenizer.chat_template = named_template("gemma3").text
    kept, dropped = preflight(rows, tokenizer)
    # Two rows Gemma 3 cannot render, two whose tool calls it would silently train away; one left.
    assert dropped == {"template_error": 2, "tool_calls_not_rendered": 2} and kept == [rows[2]]
    tokenizer.chat_template = named_template("hermes").text
    tokenizer.save_pretrained(str(tmp_path / "hermes"))
    kept, checks = check_rows(rows, ExportOptions(preflight_tokenizer=str(tmp_path / "hermes")))
    # Hermes drops text beside a call: kept, and said so in the row's `preflight` column.
    assert [r["preflight"]["tokenizer: hermes"] for r in kept] == [[], [], [], ["content_not_rendered"], []]
    assert checks["templates"]["tokenizer: hermes"]["passed"] == 5 and not checks["dropped"]


def test_a_null_content_beside_tool_calls_is_written_so_qwen3s_template_renders_it() -> None:
    """An OpenAI tool-call message carries `content: null`; Qwen3's template (and SmolLM2's copy of it, where
    TRL's KTO failed on such a row in #57's bench) looks for `</think>` in the content and fails on null."""
    from replay.export.pairs import dataset_message
    from replay.export.templates import named_template

    call = {"id": "c", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c", "content": "x"}]
    template = named_template("qwen3")
    with pytest.raises(TypeError):
        template.render(messages, None)
    assert '"command": "ls"' in template.render([dataset_message(m) for m in messages], None)
