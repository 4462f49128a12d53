"""Issue #11's realistic scenario, end to end: three loopback teachers of different styles answer
every turn of bug-fixing sessions; `--match exact` abstains on most states, the default tiers do not.

Each session walks one bug fix (list the repo, locate the symbol, read the file, write a repro, run
it, read more, edit, run the tests, look at the diff, report). At every turn each teacher proposes
that step in its own style and spelling (`lister`: shell `ls`/`find`/`cat`; `grepper`: Claude Code's
Grep/Read/Write tools; `writer`: `rg`, `sed -n`, heredoc files), and now and then (1 in 5, from a
seeded hash) does what its style favours instead: lists a folder, greps, or writes a repro. The
`grepper` also calls a `shell` tool the sessions do not have, once in a while: screened, never chosen.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from replay.run import main
from tests.llm_server import LLMServer, Reply, chat_completion
from tests.sessions import assistant, user, write_session

EPISODES = [("TypeParser", "type_parser"), ("TokenStream", "token_stream"), ("DateRange", "date_range"),
            ("UrlBuilder", "url_builder"), ("CsvReader", "csv_reader"), ("LruCache", "lru_cache"),
            ("RetryPolicy", "retry_policy")]
STEPS = ["list", "locate", "read", "create", "run", "read_test", "edit", "test", "diff", "reply"]
OLD, NEW = "    return value\n", "    return value.strip()\n"


def _roll(*parts: object) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest(), 16)


def _bash(command: str) -> dict:
    return {"name": "Bash", "arguments": {"command": command, "description": "step"}}


def _tool(name: str, **arguments: object) -> dict:
    return {"name": name, "arguments": arguments}


def proposal(teacher: str, step: str, symbol: str, module: str, salt: int) -> dict | str:
    """One teacher's answer at one step: a tool call (dict) or a text reply (str)."""
    source, test = f"src/{module}.py", f"tests/test_{module}.py"
    pick = _roll(teacher, step, module, salt)
    if pick % 5 == 0 and step not in ("edit", "reply"):  # its style's favourite instead of the step
        step = {"lister": "list_src", "grepper": "locate", "writer": "create"}[teacher]
    if teacher == "grepper" and pick % 23 == 1:
        return {"name": "shell", "arguments": {"command": "ls"}}  # not a tool of these sessions
    spellings = {
        "lister": {
            "list": [_bash("ls -la"), _bash("ls -F"), _bash("ls")],
            "list_src": [_bash("ls -la src"), _bash("ls src/")],
            "locate": [_bash(f"find . -name '{module}.py'"), _bash(f"find . -iname '*{symbol}*'")],
            "read": [_bash(f"cat {source}"), _bash(f"cat -n /repo/{source}")],
            "read_test": [_bash(f"cat {test}"), _bash(f"cat -n {test}")],
            "create": [_tool("Write", file_path="/repo/reproduce.py",
                             content=f"from src.{module} import *\n")],
            "run": [_bash("python reproduce.py")],
            "edit": [_tool("Edit", file_path=f"/repo/{source}", old_string=OLD, new_string=NEW)],
            "test": [_bash(f"python -m pytest {test} -q"), _bash(f"python -m pytest -q {test}")],
            "diff": [_bash("git diff"), _bash("git status")],
            "reply": ["Fixed: the value is stripped now and the tests pass."],
        },
        "grepper": {
            "list": [_bash("ls -la"), _bash("tree -L 1")],
            "locate": [_tool("Grep", pattern=f"class {symbol}"), _tool("Grep", pattern=symbol, path="src")],
            "read": [_tool("Read", file_path=f"/repo/{source}"), _tool("Read", file_path=source, offset=1)],
            "read_test": [_tool("Read", file_path=f"/repo/{test}")],
            "create": [_tool("Write", file_path="/repo/repro.py", content=f"import src.{module}\n")],
            "run": [_bash("python3 reproduce.py"), _bash("python reproduce.py")],
            "edit": [_tool("Edit", file_path=source, old_string=OLD, new_string=NEW, replace_all=False)],
            "test": [_bash(f"pytest {test}"), _bash(f"pytest {test} -x")],
            "diff": [_bash("git diff --stat"), _bash("git diff")],
            "reply": ["The bug is fixed."],
        },
        "writer": {
            "list": [_bash("find . -maxdepth 1"), _bash("ls -a")],
            "locate": [_bash(f"rg -n {symbol}"), _bash(f'grep -rn "{symbol}" .')],
            "read": [_bash(f"sed -n 1,200p {source}"), _bash(f"head -n 300 {source}")],
            "read_test": [_bash(f"sed -n 1,120p {test}")],
            "create": [_bash(f"cat > reproduce_issue.py << 'EOF'\nfrom src.{module} import *\nEOF")],
            "run": [_bash("python reproduce.py 2>&1 | head -50")],
            "edit": [_tool("Edit", file_path=source, old_string=OLD,
                           new_string="    return value.rstrip()\n")],
            "test": [_bash(f"pytest -x {test} 2>&1 | tail -20")],
            "diff": [_bash("git --no-pager diff")],
            "reply": ["Done."],
        },
    }[teacher][step]
    return spellings[pick % len(spellings)]


def student_block(step: str, module: str, call_id: str) -> dict:
    source = f"src/{module}.py"
    commands = {"list": "ls", "locate": f"grep -rn {module} src", "read": f"cat {source}", "run":
                "python reproduce.py", "read_test": f"cat tests/test_{module}.py", "test": "pytest",
                "diff": "git diff"}
    if step == "create":
        return {"type": "tool_use", "id": call_id, "name": "Write",
                "input": {"file_path": "/repo/reproduce.py", "content": "import src\n"}}
    if step == "edit":
        return {"type": "tool_use", "id": call_id, "name": "Edit",
                "input": {"file_path": f"/repo/{source}", "old_string": OLD,
                          "new_string": "    return value\n\n"}}
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": commands[step]}}


def write_sessions(root: Path) -> None:
    for number, (symbol, module) in enumerate(EPISODES):
        records = [user("u0", None, f"[episode {number}] {symbol} keeps the whitespace of a value. Fix it.")]
        parent = "u0"
        for turn, step in enumerate(STEPS):
            if step == "reply":
                records.append(assistant(f"a{turn}", parent, f"msg_{number}_{turn}",
                                         {"type": "text", "text": "Fixed."}))
                break
            call_id = f"toolu_{number}_{turn}"
            block = student_block(step, module, call_id)
            records.append(assistant(f"a{turn}", parent, f"msg_{number}_{turn}", block))
            records.append(user(f"u{turn + 1}", f"a{turn}", [{"type": "tool_result", "tool_use_id": call_id,
                                                             "content": f"(output of step {step})"}]))
            parent = f"u{turn + 1}"
        write_session(root / "-repo", records, name=f"{number:08d}-0000-0000-0000-000000000000")


def respond(body: dict) -> Reply:
    messages = body["messages"]
    prompt = next(m["content"] for m in messages if m["role"] == "user")
    prompt = prompt if isinstance(prompt, str) else json.dumps(prompt)
    number = int(prompt.split("[episode ", 1)[1].split("]", 1)[0])
    turn = sum(m["role"] == "assistant" for m in messages)
    symbol, module = EPISODES[number]
    answer = proposal(body["model"], STEPS[turn], symbol, module, number * 100 + turn)
    if isinstance(answer, str):
        return Reply(chat_completion(answer, model=body["model"]))
    return Reply(chat_completion(tool_calls=[answer], model=body["model"]))


def run(source: Path, out: Path, url: str, *extra: str) -> dict:
    teachers = ",".join(f"{n}=openai/{n}@{url}" for n in ("lister", "grepper", "writer"))
    assert main(["--source", str(source), "--out", str(out), "--teachers", teachers,
                 "--cache", str(out.parent / "cache.sqlite"), *extra]) == 0
    return json.loads((out / "report.json").read_text())


def test_three_styles_reach_consensus_at_the_intent_tier(tmp_path: Path) -> None:
    from datasets import load_from_disk

    write_sessions(tmp_path / "projects")
    with LLMServer(respond) as server:
        exact = run(tmp_path / "projects", tmp_path / "exact", server.url, "--match", "exact")
        tiers = run(tmp_path / "projects", tmp_path / "tiers", server.url)
    states = len(EPISODES) * len(STEPS)
    assert exact["states"] == tiers["states"] == states
    voted = states - tiers["states_all_teachers_excluded"]
    exact_rate = exact["consensus"]["reached"] / voted
    tier_rate = tiers["consensus"]["reached"] / voted
    print(f"\nconsensus reached: --match exact {exact_rate:.1%}, default tiers {tier_rate:.1%} "
          f"({tiers['consensus']})")
    assert exact_rate <= 0.40 and tier_rate >= 0.70
    assert tiers["consensus"]["exact"] == exact["consensus"]["reached"]  # the first tier is today's vote
    assert tiers["consensus"]["exact"] + tiers["consensus"]["intent"] == tiers["consensus"]["reached"]
    # The shell tool the sessions lack was proposed, screened out and counted; it is never chosen.
    assert tiers["extra"]["invalid_proposals"]["unknown_tool"] > 0
    assert tiers["teacher_calls"]["invalid"] >= tiers["extra"]["invalid_proposals"]["unknown_tool"]
    dataset = load_from_disk(str(tmp_path / "tiers" / "dataset"))
    assert set(dataset["match"]) == {"exact", "intent"}
    for row in dataset:
        assert all(call["function"]["name"] != "shell" for call in row["chosen"][0].get("tool_calls") or [])
        assert all(vote["match"] == row["match"] for vote in row["votes"])
    card = (tmp_path / "tiers" / "README.md").read_text()
    assert "## Confidence" in card and "intent" in card
