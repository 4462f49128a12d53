"""`python -m replay.view OUT`: the pages of a real loopback run, opened in a real headless Chromium.

The run reads the committed examples plus a hostile session (markup in the prompt, a tool result and the
student's answer). Tests that open a browser skip, saying why, where Debian's `chromium` is absent
(`.ci/run` installs it).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from replay.run import main as run_main
from replay.view.cli import main as view_main
from tests.llm_server import LLMServer, Reply, chat_completion, error_body
from tests.sessions import assistant, text, tool_result, tool_use, user, write_session

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(2)>'
VERDICTS = {"pair": "pairs", "agree": "agree", "all_teachers_excluded": "states_all_teachers_excluded"}


def hostile_session(folder: Path) -> Path:
    """xss-check: the student runs `ls -la` (the teachers agree), then answers with markup (a pair)."""
    return write_session(folder, [
        user("u1", None, f"xss-check {SCRIPT} and {IMG}"),
        assistant("a1", "u1", "msg_x1", tool_use("toolu_x1", "ls -la")),
        user("u2", "a1", tool_result("toolu_x1", f"{IMG}\n{SCRIPT}")),
        assistant("a2", "u2", "msg_x2", text(f"Done {IMG} {SCRIPT}")),
    ])


def teachers(body: dict[str, Any]) -> Reply:
    """Deterministic: on the hostile session all say `ls -la`; elsewhere all one command (a pair) or one
    each (no majority: abstained), by prompt; `c` refuses some requests outright (a failed call)."""
    model, messages = body.get("model", ""), json.dumps(body.get("messages"), sort_keys=True)
    h = int(hashlib.sha256(messages.encode()).hexdigest(), 16)
    if model == "c" and h % 5 == 0:
        return Reply(error_body("bad request", "invalid_request_error"), status=400)
    if "xss-check" in messages:
        command = "ls -la"
    elif h % 2 == 0:
        command = "git status"
    else:
        command = {"a": "ls -la", "b": "pytest -q", "c": "git status"}[model]
    call = {"name": "Bash", "arguments": {"command": command}}
    return Reply(chat_completion(tool_calls=[call], model=model))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of a, b, c (and a Claude teacher, excluded on Claude students) with --view."""
    root = tmp_path_factory.mktemp("view")
    source = root / "source"
    shutil.copytree(ROOT / "examples" / "sessions", source / "examples")
    hostile_session(source / "hostile")
    out = root / "out"
    with LLMServer(teachers) as server:
        pool = ",".join(f"{n}=openai/{n}@{server.url}" for n in "abc")
        pool += f",sonnet=openai/claude-sonnet-4-5@{server.url}"
        code = run_main(["--source", str(source), "--out", str(out), "--teachers", pool, "--cache",
                         str(root / "cache.sqlite"), "--include-subagents", "--view"])
    assert code == 0
    return out


class Elements(HTMLParser):
    """Every element of a page: (tag, attributes), and its text."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def by_id(self, page: str, ident: str) -> str:
        found = re.search(rf'id="{re.escape(ident)}"[^>]*>([^<]*)<', page)
        assert found, ident
        return found.group(1).strip()


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)")
    return path


def dump_dom(url: str, profile: Path) -> str:
    """The DOM after the page's scripts ran, as headless Chromium prints it."""
    done = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--no-first-run", f"--user-data-dir={profile}", "--dump-dom", url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


def report_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def script_json(path: Path) -> Any:
    """The JSON value a data/ script file holds (`X["key"] = VALUE;` / `...push.apply(X, VALUE);`)."""
    text = path.read_text()
    if "] = " in text:
        body = text[text.index("] = ") + 4:]
    else:
        body = text[text.index("apply(") + 6:]
        body = body[body.index(",") + 1:]
    return json.loads(body.rstrip().removesuffix(";").removesuffix(")"))


def records(view: Path) -> dict[int, dict[str, Any]]:
    """Every state's record in the view's data/ blocks (`s<first state>.js`), by state number."""
    out: dict[int, dict[str, Any]] = {}
    for path in (view / "data").glob("s*.js"):
        first = int(path.stem[1:])
        out.update({first + k: record for k, record in enumerate(script_json(path))})
    return out


def context_items(view: Path, record: dict[str, Any]) -> list[list[Any]]:
    """The display items a state's page shows as its context, read from the files its record names."""
    items: dict[int, list[Any]] = {}
    context = record["context"]
    for k in context["files"]:
        for segment, first, part in script_json(view / "data" / f"c{k}.js"):
            if segment == context["seg"]:
                items.update({first + j: item for j, item in enumerate(part)})
    return [items[i] for start, stop in context["ranges"] for i in range(start, stop)]


def hostile_state(out: Path) -> int:
    """The state number of the hostile session's answer (its text is in data/ files, drawn by state.js)."""
    return next(n for n, r in sorted(records(out / "view").items()) if "alert(1)" in r["student"][1])


def state_url(out: Path, number: int) -> str:
    return f"{(out / 'view' / 'state.html').as_uri()}#{number}"


def no_injected_elements(page: str) -> None:
    parsed = Elements(page)
    scripts = [attrs.get("src") for tag, attrs in parsed.tags if tag == "script"]
    assert all(src and re.fullmatch(r"(\.\./)?(assets|data)/[\w.-]+\.js", src) for src in scripts), scripts
    assert not [tag for tag, _ in parsed.tags if tag in ("img", "iframe", "object", "embed")]
    assert not [(tag, a) for tag, attrs in parsed.tags for a in attrs if a.lower().startswith("on")]


def test_the_view_is_written_with_every_page_small(run: Path) -> None:
    view = run / "view"
    report = report_of(run)
    assert len(records(view)) == report["states"] > 14
    assert not (view / "states").exists()                  # one page draws every state: no file per state
    files = [p for p in view.rglob("*") if p.is_file()]
    assert max(p.stat().st_size for p in files) < 2_000_000
    assert not [p for p in files if re.search(rb"https?://(?!127\.0\.0\.1)", p.read_bytes())
                and p.suffix != ".html"]                      # nothing fetched: no URL in assets or data
    overview = (view / "index.html").read_text()
    for verdict, key in VERDICTS.items():
        assert Elements(overview).by_id(overview, f"count-{verdict}") == str(report[key])
    assert Elements(overview).by_id(overview, "count-abstained") == str(report["consensus"]["abstained"])
    assert report["pairs"] and report["agree"] and report["consensus"]["abstained"]


def test_hostile_text_is_escaped_in_the_files(run: Path) -> None:
    for page in ("state.html", "states.html", "index.html"):
        text = (run / "view" / page).read_text()
        assert "alert" not in text and "xss-check" not in text    # no page holds session text at all
        no_injected_elements(text)
    for data in (run / "view/data").glob("*.js"):
        assert b"</script" not in data.read_bytes().lower()    # nothing in data/ can end a script


def test_overview_counts_in_chromium_equal_the_report(run: Path, tmp_path: Path) -> None:
    report = report_of(run)
    dom = dump_dom((run / "view/index.html").as_uri(), tmp_path / "profile")
    counts = {v: int(Elements(dom).by_id(dom, f"count-{v}")) for v in [*VERDICTS, "abstained"]}
    assert counts == {"pair": report["pairs"], "agree": report["agree"],
                      "all_teachers_excluded": report["states_all_teachers_excluded"],
                      "abstained": report["consensus"]["abstained"]}
    if "states_failed" in report:
        assert int(Elements(dom).by_id(dom, "count-failed")) == report["states_failed"]
    teachers_row = re.search(r">sonnet</a></td>.*?</tr>", dom, re.S)
    excluded = report["excluded_same_family"]["sonnet"]
    assert excluded == report["states"] and teachers_row and f">{excluded}<" in teachers_row.group(0)


def test_the_list_filters_and_a_pair_page_shows_both_actions(run: Path, tmp_path: Path) -> None:
    report = report_of(run)
    dom = dump_dom((run / "view/states.html").as_uri() + "#verdict=pair", tmp_path / "profile")
    assert f"{report['pairs']} of {report['states']} states" in dom
    links = re.findall(r'href="state\.html#(\d+)"', dom)
    assert len(links) == min(report["pairs"], 100)
    page = dump_dom(state_url(run, int(links[0])), tmp_path / "profile")
    pair = re.search(r'id="pair".*?id="diff"', page, re.S)
    assert pair and "chosen" in pair.group(0) and "rejected" in pair.group(0)
    chosen, rejected = re.findall(r'class="msg assistant (chosen|rejected)"', pair.group(0))
    assert (chosen, rejected) == ("chosen", "rejected")
    assert re.search(r'class="(add|del)"', page)               # the tool-call diff


def test_each_message_is_written_once_and_pages_name_their_context(run: Path) -> None:
    """A trace's context sits in data/ files once, however many states show it (#29), and every file,
    range and link a record names resolves."""
    view = run / "view"
    prompt = "xss-check"
    holders = [p for p in view.rglob("*") if p.is_file() and prompt.encode() in p.read_bytes()]
    assert [p.parent.name for p in holders] == ["data"], holders
    assert holders[0].read_bytes().count(prompt.encode()) == 1
    assert b"alert(1)<\\/script>" in holders[0].read_bytes()       # JSON that cannot end a script
    assert '<script src="data/where.js"></script>' in (view / "state.html").read_text()
    where = json.loads((view / "data/where.js").read_text().split(" = ", 1)[1].rstrip().removesuffix(";"))
    assert sorted(int(p.stem[1:]) for p in (view / "data").glob("s*.js")) == where and where[0] == 0
    every = records(view)
    assert sorted(every) == list(range(report_of(run)["states"]))
    states = [json.loads(line) for line in (run / "states.jsonl").read_text().splitlines()]
    for number, record in every.items():
        assert record["id"] == states[number]["state_id"]
        shown = context_items(view, record)             # raises if a file or an item is missing
        assert len(shown) == sum(stop - start for start, stop in states[number]["messages"])
        assert not record["context"]["dropped"]
        if record["next"] is not None:
            after = every[record["next"]]
            assert after["trace"] == record["trace"] and after["prev"] == number
    hostile = every[hostile_state(run)]
    assert any(prompt in item[1] for item in context_items(view, hostile)) and hostile["prev"] is not None


def test_a_run_stored_before_linear_storage_draws_the_same_states(run: Path, tmp_path: Path) -> None:
    """states.jsonl with every state whole on its line (no traces.jsonl): the same records and contexts."""
    from ingestion.store import load_states

    older = tmp_path / "older"
    shutil.copytree(run, older, ignore=shutil.ignore_patterns("view", "traces.jsonl", "states.jsonl"))
    (older / "states.jsonl").write_text("".join(state.model_dump_json() + "\n" for state in load_states(run)))
    assert view_main([str(older)]) == 0
    new, old = records(run / "view"), records(older / "view")
    def without_context(every: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        return {n: {**r, "context": None} for n, r in every.items()}

    assert without_context(new) == without_context(old)
    assert [context_items(run / "view", r) for r in new.values()] == \
        [context_items(older / "view", r) for r in old.values()]


def test_hostile_session_renders_as_text_in_chromium(run: Path, tmp_path: Path) -> None:
    dom = dump_dom(state_url(run, hostile_state(run)), tmp_path / "profile")
    no_injected_elements(dom)
    text = "".join(Elements(dom).text)
    assert SCRIPT in text and IMG in text                      # shown, as text
    context = re.search(r'id="context".*', dom, re.S)
    assert context and "xss-check" in context.group(0)         # the context, drawn from data/
    assert 'class="msg user"' in context.group(0) and 'class="msg tool"' in context.group(0)
    listing = dump_dom((run / "view/states.html").as_uri() + "#trace=11111111", tmp_path / "profile")
    no_injected_elements(listing)
    assert f"Done {IMG}" in "".join(Elements(listing).text)


def test_stored_verdicts_draw_the_same_pages_as_deciding_again(run: Path, tmp_path: Path) -> None:
    """The view reads verdicts.jsonl; a run without it (an older run) is decided again: same pages."""
    assert (run / "verdicts.jsonl").is_file()
    older = tmp_path / "older"
    shutil.copytree(run, older, ignore=shutil.ignore_patterns("view", "verdicts.jsonl"))
    assert view_main([str(older)]) == 0
    assert records(older / "view") == records(run / "view")
    def page(view: Path) -> str:     # the run's folder name and path in the header differ
        return re.sub(r'title="[^"]*"|>[^<]*</span></nav>', "", (view / "index.html").read_text())

    assert page(older / "view") == page(run / "view")


def test_a_selected_run_shows_its_unselected_states(tmp_path: Path) -> None:
    """--select: the states left out are `unselected` (never asked), the others keep the run's verdicts."""
    with LLMServer(teachers) as server:
        pool = ",".join(f"{n}=openai/{n}@{server.url}" for n in "abc")
        code = run_main(["--source", str(ROOT / "examples" / "sessions"), "--out", str(tmp_path / "out"),
                         "--teachers", pool, "--cache", str(tmp_path / "cache.sqlite"),
                         "--select", "outcome=error", "--view"])
    assert code == 0
    report = report_of(tmp_path / "out")
    kinds = [r["verdict"] for r in records(tmp_path / "out/view").values()]
    assert report["states_unselected"] and kinds.count("unselected") == report["states_unselected"]
    assert len(kinds) - kinds.count("unselected") == report["pairs"] + report["agree"] \
        + report["consensus"]["abstained"] + report.get("states_failed", 0) \
        + report["states_all_teachers_excluded"]
    overview = (tmp_path / "out/view/index.html").read_text()
    assert Elements(overview).by_id(overview, "count-unselected") == str(report["states_unselected"])


def test_a_dry_run_and_bad_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = hostile_session(tmp_path / "src")
    assert run_main(["--source", str(hostile), "--out", str(tmp_path / "dry"), "--dry-run"]) == 0
    assert view_main([str(tmp_path / "dry")]) == 0
    record = records(tmp_path / "dry/view")[1]
    assert record["verdict"] == "not_asked" and SCRIPT in record["student"][1]
    capsys.readouterr()
    assert view_main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "replay.view: error:" in err and "nowhere" in err
    done = subprocess.run([sys.executable, "-m", "replay.view", str(tmp_path / "src")], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "states.jsonl not found" in done.stderr


def test_the_overview_shows_an_ablation_when_the_run_has_one(run: Path, tmp_path: Path) -> None:
    from replay.ablate import main as ablate_main

    copy = tmp_path / "out"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("view"))
    assert ablate_main(["--run", str(copy), "--pools", "a,b,c,sonnet;a,b"]) == 0
    assert view_main([str(copy)]) == 0
    overview = (copy / "view/index.html").read_text()
    table = re.search(r'id="ablation".*?</table>', overview, re.S)
    assert table and ">a+b<" in table.group(0)
    assert '<img class="plot" src="ablation.png"' in overview and (copy / "view/ablation.png").is_file()
    # which teachers are worth paying for (#27): the quality axis, each teacher's share, the frontier
    assert "hindsight intent rate" in table.group(0) and "usd per pair" in table.group(0)
    shares = re.search(r'id="teacher-shares".*?</table>', overview, re.S)
    assert shares and "shapley pairs" in shares.group(0) and ">sonnet<" in shares.group(0)
    assert '<img class="plot" src="frontier.png"' in overview and (copy / "view/frontier.png").is_file()


@pytest.mark.parametrize("pool", [
    "gpt-5,deepseek,kimi",
    "a=openai/a@http://127.0.0.1:9/v1, b=openai/b@http://127.0.0.1:9/v1,sonnet=openai/claude-sonnet-4-5@http://127.0.0.1:9",
    "deepseek#price=1/2,c=kimi,d=deepseek#price=0.5/1.5/0.1",
])
def test_the_view_names_a_pool_as_the_registry_does(pool: str) -> None:
    """The view reads teacher names off run.json's pool without importing the teachers package."""
    from replay.view.load import pool_names
    from teachers.registry import parse_pool

    assert pool_names(pool) == [spec.name for spec in parse_pool(pool)]

