"""`replay.ablate` end to end, after real `replay.run`s against loopback OpenAI-compatible servers."""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from replay.ablate import main as ablate_main
from replay.run import main as run_main
from tests.cli import Held, sigint_while_held
from tests.llm_server import LLMServer, Reply, chat_completion
from tests.teacher_script import COMMANDS, prompt_hash

ROOT = Path(__file__).resolve().parents[1]
AGREES = {"a": 100, "b": 80, "c": 60, "d": 35}  # % of states a teacher gives the state's "right" command


def varied(body: dict[str, Any]) -> Reply:
    """Teachers that agree with a per-state right answer at different rates; `j*` models judge."""
    model = body.get("model", "")
    if model.startswith("j"):
        return Reply(chat_completion("Candidate 1 is the safest.\nANSWER: 1", model=model))
    h = prompt_hash(body)
    roll = int(hashlib.sha256(f"{model}:{h}".encode()).hexdigest(), 16)
    right = h % len(COMMANDS)
    choice = right if roll % 100 < AGREES.get(model, 50) else (roll // 100) % len(COMMANDS)
    return Reply(chat_completion(tool_calls=[{"name": "Bash", "arguments": {"command": COMMANDS[choice]}}],
                                 model=model))


def pool(url: str, *names: str) -> str:
    return ",".join(f"{n}=openai/{n}@{url}" for n in names)


def replay_run(source: Path, out: Path, teachers: str, *extra: str) -> dict:
    assert run_main(["--source", str(source), "--out", str(out), "--teachers", teachers,
                     "--cache", str(out.parent / "cache.sqlite"), *extra]) == 0
    return json.loads((out / "report.json").read_text())


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


def run_counts(report: dict) -> dict[str, int]:
    return {"all_teachers_excluded": report["states_all_teachers_excluded"],
            "reached": report["consensus"]["reached"], "abstained": report["consensus"]["abstained"],
            "agree": report["agree"], "pairs": report["pairs"]}


def row_counts(row: dict[str, str]) -> dict[str, int]:
    return {key: int(row[key]) for key in ("all_teachers_excluded", "reached", "abstained", "agree", "pairs")}


@dataclass
class Run:
    server: LLMServer
    out: Path
    report: dict


@pytest.fixture(scope="module")
def four(fixtures_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One run of 4 teachers over all the shared fixtures; its server stays up to count requests."""
    with pytest.MonkeyPatch.context() as patch, LLMServer(varied) as server:
        patch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        out = tmp_path_factory.mktemp("four") / "run"
        report = replay_run(fixtures_root, out, pool(server.url, "a", "b", "c", "d"))
        yield Run(server, out, report)


def test_all_subsets_from_the_cache_equal_the_run(four: Run, tmp_path: Path) -> None:
    from datasets import load_from_disk

    before = len(four.server.requests)
    out = tmp_path / "ablation"
    assert ablate_main(["--run", str(four.out), "--all-subsets", "--out", str(out)]) == 0
    assert len(four.server.requests) == before  # every answer came from proposals.jsonl
    rows = read_csv(out / "ablation.csv")
    assert len(rows) == 15 and len({r["pool"] for r in rows}) == 15
    full = rows[0]
    assert full["pool"] == "a+b+c+d" and row_counts(full) == run_counts(four.report)
    assert int(full["voted"]) + int(full["all_teachers_excluded"]) == four.report["states"]
    assert float(full["jaccard_full"]) == 1.0
    # The full pool's pairs are the run's, row for row.
    assert (out / "a+b+c+d" / "pairs.jsonl").read_text() == (four.out / "pairs.jsonl").read_text()
    for row in rows:
        assert load_from_disk(str(out / row["dataset"])).num_rows == int(row["pairs"])
        assert (out / row["pool"] / "README.md").read_text().count("python -m replay.ablate") == 1
    by_pool = {r["pool"]: r for r in rows}
    assert float(by_pool["a"]["consensus_rate"]) == 1.0  # one voter always has a majority
    assert float(by_pool["c+d"]["consensus_rate"]) < float(by_pool["a+b"]["consensus_rate"])
    assert 0 < float(by_pool["c+d"]["jaccard_full"]) < 1
    agreement = read_csv(out / "agreement.csv")
    assert len(agreement) == 16
    cell = {(r["teacher_a"], r["teacher_b"]): r for r in agreement}
    assert float(cell["a", "a"]["raw"]) == 1.0 and int(cell["a", "a"]["states"]) == four.report["states"]
    assert float(cell["a", "b"]["raw"]) > float(cell["a", "d"]["raw"])  # b agrees with a more than d does
    assert cell["a", "b"]["kappa"] == cell["b", "a"]["kappa"]
    assert (out / "ablation.png").read_bytes()[:4] == b"\x89PNG"
    markdown = (out / "ablation.md").read_text()
    assert "Cohen's kappa" in markdown and "| [a+b+c+d](a+b+c+d/README.md) |" in markdown


def test_pools_and_leave_one_out(four: Run, tmp_path: Path) -> None:
    before = len(four.server.requests)
    assert ablate_main(["--run", str(four.out), "--pools", "b,a;d; a ,b", "--out", str(tmp_path / "p")]) == 0
    assert [r["pool"] for r in read_csv(tmp_path / "p" / "ablation.csv")] == ["a+b+c+d", "a+b", "d"]
    assert ablate_main(["--run", str(four.out), "--leave-one-out", "--out", str(tmp_path / "l")]) == 0
    assert [r["pool"] for r in read_csv(tmp_path / "l" / "ablation.csv")] == [
        "a+b+c+d", "b+c+d", "a+c+d", "a+b+d", "a+b+c"]
    assert len(four.server.requests) == before


def test_a_teacher_never_queried_is_an_error_unless_calls_are_allowed(
        four: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = len(four.server.requests)
    assert ablate_main(["--run", str(four.out), "--pools", "a,zed;a", "--out", str(tmp_path / "x")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error:") and "'zed'" in error and "--allow-calls" in error
    assert len(error.splitlines()) == 1 and not (tmp_path / "x").exists()
    new = f"e=openai/e@{four.server.url}"
    args = ["--run", str(four.out), "--pools", f"a,b,{new};e", "--out", str(tmp_path / "y"), "--allow-calls"]
    assert ablate_main(args) == 0
    asked = four.server.requests[before:]
    assert {r["model"] for r in asked} == {"e"} and len(asked) == four.report["states"]
    rows = read_csv(tmp_path / "y" / "ablation.csv")
    assert [r["pool"] for r in rows] == ["a+b+c+d", "a+b+e", "e"]
    assert row_counts(rows[0]) == run_counts(four.report)
    assert ablate_main(args) == 0  # a second time: e's answers are in the run's cache
    assert len(four.server.requests) == before + len(asked)


def test_sigint_while_asking_is_one_line(four: Run, tmp_path: Path) -> None:
    """Started as a script's background job is (SIGINT ignored), interrupted while a new teacher's
    request is held: exit 130, one line, no traceback."""
    held = Held(varied)
    with LLMServer(held) as slow:
        code, text = sigint_while_held(["-m", "replay.ablate", "--run", str(four.out), "--pools",
                                        f"a,f=openai/f@{slow.url}", "--out", str(tmp_path / "z"),
                                        "--allow-calls"], held)
    assert code == 130, text
    last = text.strip().splitlines()[-1]
    assert last.startswith("interrupted (SIGINT): every answer received is in the cache"), text
    assert "Traceback" not in text


def test_same_family_exclusion_per_state(fixtures_root: Path, tmp_path: Path) -> None:
    session = next(fixtures_root.rglob("d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl"))  # claude-opus-4-6
    with LLMServer(varied) as server:
        teachers = f"{pool(server.url, 'a', 'b')},sonnet=openai/claude-sonnet-4-5@{server.url}"
        report = replay_run(session, tmp_path / "run", teachers)
        assert ablate_main(["--run", str(tmp_path / "run"), "--pools", "sonnet;a,sonnet"]) == 0
        assert {r["model"] for r in server.requests} == {"a", "b"}
    rows = read_csv(tmp_path / "run" / "ablation" / "ablation.csv")
    assert [r["pool"] for r in rows] == ["a+b+sonnet", "sonnet", "a+sonnet"]
    assert row_counts(rows[0]) == run_counts(report)
    assert rows[0]["excluded_same_family"] == f"sonnet:{report['states']}" == f"sonnet:{4}"
    assert int(rows[1]["all_teachers_excluded"]) == 4 and rows[1]["voted"] == "0" and rows[1]["pairs"] == "0"
    assert int(rows[2]["voted"]) == 4 and rows[2]["consensus_rate"] == "1.0"


def test_samples_and_workers(fixtures_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = next(fixtures_root.rglob("03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"))  # 9 states
    with LLMServer(varied) as server:
        report = replay_run(session, tmp_path / "run", pool(server.url, "b", "c", "d"), "--samples", "2")
        asked = len(server.requests)
        assert asked == 9 * 3 * 2
        run = ["--run", str(tmp_path / "run"), "--all-subsets", "--out"]
        monkeypatch.setenv("REPLAY_ABLATE_WORKERS", "1")  # in-process: the same outputs as forked workers
        assert ablate_main([*run, str(tmp_path / "one")]) == 0
        monkeypatch.setenv("REPLAY_ABLATE_WORKERS", "3")
        assert ablate_main([*run, str(tmp_path / "three")]) == 0
        assert len(server.requests) == asked
    one, three = ((tmp_path / name / "ablation.csv").read_text() for name in ("one", "three"))
    assert one == three and row_counts(read_csv(tmp_path / "one" / "ablation.csv")[0]) == run_counts(report)
    for folder in ("b+c+d", "b", "c+d"):
        assert (tmp_path / "one" / folder / "pairs.jsonl").read_text() == \
            (tmp_path / "three" / folder / "pairs.jsonl").read_text()
    monkeypatch.setenv("REPLAY_ABLATE_WORKERS", "many")
    assert ablate_main(["--run", str(tmp_path / "run"), "--leave-one-out"]) == 2


CHEAP, MID, DEAR = "gpt-4o-mini", "gpt-4.1-mini", "gpt-4o"  # priced: early stop asks cheapest first


def test_early_stop_runs_need_allow_calls_or_allow_missing(
        fixtures_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = next(fixtures_root.rglob("03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"))  # 9 states
    with LLMServer(lambda body: varied({**body, "model": "a" if body["model"] != DEAR else "d"})) as server:
        priced = ",".join(f"{n}=openai/{n}@{server.url}#price={n}" for n in (DEAR, MID, CHEAP))  # spec prices
        report = replay_run(session, tmp_path / "run", priced, "--early-stop")
        run = str(tmp_path / "run")
        asked = len(server.requests)
        assert asked < 27  # the two cheap ones agree: the dear one is rarely asked
        assert ablate_main(["--run", run, "--all-subsets"]) == 2
        error = capsys.readouterr().err
        assert f"{27 - asked} answers" in error and "--early-stop" in error and DEAR in error
        assert ablate_main(["--run", run, "--all-subsets", "--allow-missing", "--out", str(tmp_path / "m")]) \
            == 0
        missing = read_csv(tmp_path / "m" / "ablation.csv")
        assert row_counts(missing[0]) == run_counts(report)
        assert int({r["pool"]: r for r in missing}[DEAR]["unanswered"]) == 9 - (asked - 18)
        assert len(server.requests) == asked
        assert ablate_main(["--run", run, "--all-subsets", "--allow-calls", "--out", str(tmp_path / "c")]) \
            == 0
        assert len(server.requests) == 27 and {r["model"] for r in server.requests[asked:]} == {DEAR}
    called = read_csv(tmp_path / "c" / "ablation.csv")
    assert int(called[0]["agree"]) + int(called[0]["pairs"]) == report["agree"] + report["pairs"]
    assert all(r["unanswered"] == "0" for r in called)


def test_judge_runs_judge_each_pool_through_the_cache(
        fixtures_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = next(fixtures_root.rglob("03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"))
    with LLMServer(varied) as server:
        report = replay_run(session, tmp_path / "run", pool(server.url, "b", "c", "d"),
                            "--consensus", "judge", "--judge", f"judge=openai/j1@{server.url}")
        run = str(tmp_path / "run")
        assert ablate_main(["--run", run, "--pools", "b,c"]) == 2
        assert "--consensus judge" in capsys.readouterr().err
        before = len(server.requests)
        full_only = ["--run", run, "--pools", "d,c,b", "--allow-calls", "--out", str(tmp_path / "f")]
        assert ablate_main(full_only) == 0
        assert len(server.requests) == before  # the full pool's judgements are the run's, cached
        assert row_counts(read_csv(tmp_path / "f" / "ablation.csv")[0]) == run_counts(report)
        assert ablate_main(["--run", run, "--pools", "b,c", "--allow-calls"]) == 0
        judged = server.requests[before:]
        assert {r["model"] for r in judged} <= {"j1"}  # only the new pool's judgements; no teacher asked
        again = len(server.requests)
        assert ablate_main(["--run", run, "--pools", "b,c", "--allow-calls"]) == 0
        assert len(server.requests) == again
    rows = read_csv(tmp_path / "run" / "ablation" / "ablation.csv")
    assert row_counts(rows[0]) == run_counts(report)
    assert (tmp_path / "run" / "ablation" / "b+c+d" / "pairs.jsonl").read_text() == \
        (tmp_path / "run" / "pairs.jsonl").read_text()


def test_user_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ablate_main(["--run", str(tmp_path / "nowhere"), "--all-subsets"]) == 2
    assert "run.json" in capsys.readouterr().err
    dry = tmp_path / "dry"
    dry.mkdir()
    (dry / "states.jsonl").write_text("")
    (dry / "run.json").write_text(json.dumps({"source": "x", "out": str(dry), "dry_run": True}))
    assert ablate_main(["--run", str(dry), "--leave-one-out"]) == 2
    err = capsys.readouterr().err
    assert "no teacher answers" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as exit_info:
        ablate_main(["--run", str(dry), "--all-subsets", "--leave-one-out"])
    assert exit_info.value.code == 2


def test_help_imports_nothing_heavy() -> None:
    done = subprocess.run([sys.executable, "-m", "replay.ablate", "--help"], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert "--all-subsets" in done.stdout and "--allow-calls" in done.stdout
    imported = subprocess.run([sys.executable, "-X", "importtime", "-m", "replay.ablate", "--help"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stderr
    modules = {line.rsplit("|", 1)[-1].strip() for line in imported.splitlines()}
    assert "argparse" in modules and not modules & {"datasets", "matplotlib", "litellm", "pyarrow"}
