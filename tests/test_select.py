"""`--select` (#25 item 3): the states chosen by outcome, tool, window and sample; only they are asked."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ingestion.options import IngestOptions
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from replay.run import main
from replay.select.filters import Row, choose, parse_selection, row_of
from tests.llm_server import LLMServer, Reply, chat_completion

FAILED = ("error", "rejected", "interrupted")


def _rows(traces: int = 3, turns: int = 40) -> list[Row]:
    kinds = ["ok", "ok", "error", "ok", "ok", "ok", "rejected", "ok"]
    return [Row(f"s:t{t}:{i}", f"t{t}", kinds[(i + t) % len(kinds)],
                frozenset({"Edit"} if i % 3 == 0 else {"Bash", "Read"} if i % 3 == 1 else set()))
            for t in range(traces) for i in range(turns)]


def test_filters_combine_and_across_or_within() -> None:
    rows = _rows()
    failed = choose(rows, parse_selection(["outcome=error,rejected"]))
    assert failed == {r.state_id for r in rows if r.kind in ("error", "rejected")}
    edits = choose(rows, parse_selection(["tool=Edit,Read"]))
    assert edits == {r.state_id for r in rows if r.tools & {"Edit", "Read"}}
    both = choose(rows, parse_selection(["outcome=error,rejected", "tool=Edit,Read"]))
    assert both == failed & edits and both


def test_after_failure_is_the_failed_state_and_the_next_n_of_its_trace() -> None:
    rows = _rows(traces=2, turns=12)
    chosen = choose(rows, parse_selection(["after-failure=2"]))
    expected = set()
    for trace in ("t0", "t1"):
        own = [r for r in rows if r.trace_id == trace]
        for index, row in enumerate(own):
            if row.kind in FAILED:
                expected |= {r.state_id for r in own[index:index + 3]}
    assert chosen == expected


def test_per_trace_sample_is_seeded_reproducible_and_stable_as_a_trace_grows() -> None:
    rows = _rows(traces=3, turns=40)
    first = choose(rows, parse_selection(["per-trace=5"]))
    assert first == choose(list(rows), parse_selection(["per-trace=5"]))
    assert Counter(r.trace_id for r in rows if r.state_id in first) == {"t0": 5, "t1": 5, "t2": 5}
    assert first != choose(rows, parse_selection(["per-trace=5:1"]))
    # a trace with more turns keeps the states it had unless a new one outranks them: ranks are per state
    longer = choose(_rows(traces=3, turns=80), parse_selection(["per-trace=5"]))
    assert len(first & longer) >= 5
    # a cap on the states the other filters keep
    failed_sample = choose(rows, parse_selection(["outcome=failed", "per-trace=2"]))
    assert len(failed_sample) == 6 and all(r.kind in FAILED for r in rows if r.state_id in failed_sample)


@pytest.mark.parametrize("value", ["outcome=eror", "tool=", "per-trace=0", "after-failure=-1", "colour=red",
                                   "outcome"])
def test_a_bad_filter_is_one_line_exit_2(value: str, capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--source", str(tmp_path), "--dry-run", "--select", value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--select" in err and "Traceback" not in err


def _key(messages: list[dict[str, Any]]) -> tuple[int, str]:
    last = messages[-1]
    return len(messages), str(last.get("tool_call_id") or last.get("content"))[:200]


def test_selected_states_only_are_estimated_and_asked(fixtures_root: Path, tmp_path: Path) -> None:
    states = list(iter_states(fixtures_root, IngestOptions(), IngestStats()))
    failed = {_key(s.messages) for s in states if s.metadata["outcome"]["kind"] in FAILED}
    kinds = Counter(s.metadata["outcome"]["kind"] for s in states)
    assert 0 < len(failed) < len(states) / 4

    def respond(body: dict[str, Any]) -> Reply:
        return Reply(chat_completion("I would stop here.", model=body["model"]))

    with LLMServer(respond) as server:
        teachers = f"ta=openai/ta@{server.url}#price=gpt-4o,tb=openai/tb@{server.url}#price=gpt-4o"
        reports = {}
        for name, extra in (("all", []), ("failed", ["--select", "outcome=error,rejected,interrupted"])):
            out = tmp_path / f"dry-{name}"
            assert main(["--source", str(fixtures_root), "--out", str(out), "--teachers", teachers,
                         "--dry-run", "--no-redact", *extra]) == 0
            reports[name] = json.loads((out / "report.json").read_text())
        assert server.requests == []   # a dry run calls nothing
        left_out = set(json.loads((tmp_path / "dry-failed" / "selection.json").read_text())["unselected"])
        assert left_out == {s.state_id for s in states if s.metadata["outcome"]["kind"] not in FAILED}
        every, chosen = reports["all"], reports["failed"]
        assert every["outcomes"] == chosen["outcomes"] == dict(sorted(kinds.items()))
        assert every["states"] == chosen["states"] == len(states)
        assert every["states_unselected"] == 0
        assert chosen["states_unselected"] == len(states) - len(failed)
        for teacher in ("ta", "tb"):
            assert every["extra"]["estimate"][teacher]["calls"] == len(states)
            assert chosen["extra"]["estimate"][teacher]["calls"] == len(failed)
            assert chosen["extra"]["estimate"][teacher]["cost_usd"] < every["extra"]["estimate"][teacher][
                "cost_usd"] / 4
        out = tmp_path / "run"
        assert main(["--source", str(fixtures_root), "--out", str(out), "--teachers", teachers,
                     "--no-redact", "--cache", str(tmp_path / "cache.sqlite"),
                     "--select", "outcome=error,rejected,interrupted"]) == 0
        asked = Counter(_key(body["messages"]) for body in server.requests)
    assert set(asked) == failed
    assert sum(asked.values()) == 2 * len(failed)   # each selected state once per teacher, no other
    report = json.loads((out / "report.json").read_text())
    assert report["states_unselected"] == len(states) - len(failed)
    assert report["teacher_calls"]["made"] == 2 * len(failed)
    selection = json.loads((out / "selection.json").read_text())
    assert (selection["selected"], len(selection["unselected"])) == (len(failed), len(states) - len(failed))
    from replay.ablation.load import load_run

    assert {_key(s.messages) for s in load_run(out).states} == failed   # ablations see what was asked
    assert main(["--source", str(fixtures_root), "--out", str(out), "--dry-run"]) == 0
    assert not (out / "selection.json").exists()   # a later run without --select leaves none behind


def test_row_of_a_state_without_outcome_is_ok(fixtures_root: Path) -> None:
    state = next(iter_states(fixtures_root, IngestOptions(), IngestStats()))
    state.metadata.pop("outcome")
    assert row_of(state).kind == "ok"
