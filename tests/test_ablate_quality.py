"""The judging half of `replay.ablate` (#27) and hindsight agreement (#25 item 5), end to end on a
loopback scenario where the student fails and recovers (tests/hindsight_scenario.py)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from replay.ablate import main as ablate_main
from replay.run import main as run_main
from tests import hindsight_scenario as scenario
from tests.llm_server import LLMServer

TEACHERS = ("careful1", "careful2", "stray", "recover", "repeat")


pool = scenario.pool


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


@dataclass
class Scenario:
    server: LLMServer
    root: Path
    runs: dict[str, Path]
    reports: dict[str, dict]
    ingested: bool        # ingestion filled metadata.outcome / recovery itself


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """Two runs over the same session: all five teachers, and the three of the reliability scenario
    (the second from the cache)."""
    with pytest.MonkeyPatch.context() as patch, LLMServer(scenario.respond) as server:
        patch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        root = tmp_path_factory.mktemp("hindsight")
        source = root / "src"
        scenario.write(source)
        runs, reports, ingested = {}, {}, True
        for name, teachers in (("five", TEACHERS), ("three", TEACHERS[:3])):
            out = root / name
            assert run_main(["--source", str(source), "--out", str(out), "--teachers",
                             pool(server.url, *teachers), "--cache", str(root / "cache.sqlite")]) == 0
            reports[name] = json.loads((out / "report.json").read_text())
            ingested = scenario.ensure_outcomes(out) and ingested
            runs[name] = out
        yield Scenario(server, root, runs, reports, ingested)


def test_hindsight_per_pool(scene: Scenario, tmp_path: Path) -> None:
    before = len(scene.server.requests)
    out = tmp_path / "a"
    assert ablate_main(["--run", str(scene.runs["five"]), "--out", str(out),
                        "--pools", "recover;repeat;careful1,careful2,stray;stray;recover,repeat"]) == 0
    assert len(scene.server.requests) == before  # all from the run's answers
    rows = {r["pool"]: r for r in read_csv(out / "ablation.csv")}
    failed = scenario.TURNS // 2
    assert int(rows["recover"]["hindsight_states"]) == failed
    assert float(rows["recover"]["hindsight_intent_rate"]) == 1.0
    assert float(rows["recover"]["hindsight_exact_rate"]) == 1.0
    assert float(rows["repeat"]["hindsight_intent_rate"]) == 0.0
    assert float(rows["repeat"]["failed_reached_rate"]) == 1.0  # it did decide: on the failed call
    mixed = float(rows["careful1+careful2+stray"]["hindsight_intent_rate"])
    assert 0.0 < mixed < 1.0
    assert float(rows["stray"]["hindsight_intent_rate"]) < mixed
    assert float(rows["recover+repeat"]["hindsight_intent_rate"]) == 0.0  # a tie is no consensus
    assert float(rows["recover+repeat"]["failed_reached_rate"]) == 0.0
    document = json.loads((out / "ablation.json").read_text())
    assert document["pools"][0]["hindsight"]["states"] == failed
    assert "Hindsight agreement" in (out / "recover" / "README.md").read_text()


def test_run_report_and_card_say_hindsight(scene: Scenario) -> None:
    report = scene.reports["five"]
    assert set(report["hindsight"]) >= {"failed", "states", "exact", "intent", "intent_rate"}
    if not scene.ingested:
        pytest.skip("ingestion does not fill metadata.outcome yet: the run saw no failed state")
    assert report["hindsight"]["states"] == scenario.TURNS // 2
    assert 0 < report["hindsight"]["intent_rate"] < 1
    assert "## Hindsight agreement" in (scene.runs["five"] / "README.md").read_text()


def test_the_stray_teacher_is_found_and_the_weighted_vote_holds(scene: Scenario, tmp_path: Path) -> None:
    before = len(scene.server.requests)
    votes, weighted = tmp_path / "vote", tmp_path / "weighted"
    assert ablate_main(["--run", str(scene.runs["three"]), "--out", str(votes), "--leave-one-out",
                        "--recommend", "0.05"]) == 0
    assert ablate_main(["--run", str(scene.runs["three"]), "--out", str(weighted), "--leave-one-out",
                        "--consensus", "weighted"]) == 0
    assert len(scene.server.requests) == before
    teachers = {r["teacher"]: r for r in read_csv(votes / "teachers.csv")}
    hindsight = {t: float(r["shapley_hindsight_intent"]) for t, r in teachers.items()}
    reliability = {t: float(r["reliability"]) for t, r in teachers.items()}
    assert min(hindsight, key=hindsight.__getitem__) == "stray"
    assert min(reliability, key=reliability.__getitem__) == "stray"
    full = read_csv(votes / "ablation.csv")[0]
    # Efficiency: the shares add up to the full pool's value.
    assert sum(float(r["shapley_pairs"]) for r in teachers.values()) == pytest.approx(float(full["pairs"]))
    assert sum(hindsight.values()) == pytest.approx(float(full["hindsight_intent_rate"]))
    cost = sum(float(r["shapley_cost_usd"]) for r in teachers.values())
    assert cost == pytest.approx(float(full["cost_usd"]))
    by_vote, by_weight = full, read_csv(weighted / "ablation.csv")[0]
    assert int(by_weight["pairs"]) >= int(by_vote["pairs"])
    assert float(by_weight["hindsight_intent_rate"]) >= float(by_vote["hindsight_intent_rate"])
    document = json.loads((votes / "ablation.json").read_text())
    quality = document["quality"]
    assert quality["shapley_exact"] is True and quality["recommended"]
    assert {o["name"] for o in quality["asking_orders"]} == {"cheapest first", "most reliable first"}
    assert quality["methods"]["weighted"]["pairs"] >= quality["methods"]["vote"]["pairs"]
    assert (votes / "frontier.png").read_bytes()[:4] == b"\x89PNG"
    markdown = (votes / "teachers.md").read_text()
    assert "Recommended" in markdown and "Dawid" in markdown
    assert "hindsight intent / exact" in (votes / "ablation.md").read_text()


def test_weighted_run_reports_its_weights(scene: Scenario, tmp_path: Path) -> None:
    before = len(scene.server.requests)
    out = tmp_path / "weighted-run"
    assert run_main(["--source", str(scene.root / "src"), "--out", str(out), "--consensus", "weighted",
                     "--teachers", pool(scene.server.url, *TEACHERS[:3]),
                     "--cache", str(scene.root / "cache.sqlite")]) == 0
    assert len(scene.server.requests) == before  # every answer from the cache
    report = json.loads((out / "report.json").read_text())
    weights = report["extra"]["reliability"]["teachers"]
    assert min(weights, key=weights.__getitem__) == "stray"
    assert report["pairs"] >= scene.reports["three"]["pairs"]
    # The ablation of a weighted run decides its full pool as the run did.
    ablation = tmp_path / "ablation"
    assert ablate_main(["--run", str(out), "--out", str(ablation), "--pools", "careful1,stray"]) == 0
    full = read_csv(ablation / "ablation.csv")[0]
    assert int(full["pairs"]) == report["pairs"] and int(full["agree"]) == report["agree"]


def test_weighted_and_early_stop_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["--source", str(tmp_path), "--out", str(tmp_path / "o"), "--teachers", "a=openai/a",
                     "--consensus", "weighted", "--early-stop"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_all_subsets_of_six_teachers_on_the_fixtures_ask_nothing(fixtures_root: Path, tmp_path: Path) -> None:
    from tests.test_ablate import varied

    names = ("a", "b", "c", "d", "e", "f")
    with LLMServer(varied) as server:
        out = tmp_path / "run"
        assert run_main(["--source", str(fixtures_root), "--out", str(out), "--teachers",
                         ",".join(f"{n}=openai/{n}@{server.url}" for n in names),
                         "--cache", str(tmp_path / "cache.sqlite"), "--max-states", "80"]) == 0
        before = len(server.requests)  # (80 states: 63 datasets of whole fixture prompts are slow to write)
        assert ablate_main(["--run", str(out), "--all-subsets", "--out", str(tmp_path / "a")]) == 0
        assert len(server.requests) == before
    rows = read_csv(tmp_path / "a" / "ablation.csv")
    assert len(rows) == 63
    teachers = read_csv(tmp_path / "a" / "teachers.csv")
    assert [r["teacher"] for r in teachers] == list(names)
    assert sum(float(r["shapley_pairs"]) for r in teachers) == pytest.approx(float(rows[0]["pairs"]))
    reliability = {r["teacher"]: float(r["reliability"]) for r in teachers}
    assert reliability["a"] > reliability["d"]  # a gives the state's answer 100% of the time, d 35%
