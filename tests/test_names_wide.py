"""The run's second names pass (replay/ingest/names_wide.py) on a written store: every name of the run's
list replaced as a word in every trace, structure kept, and a rollout state whose history changed loses
its token ids (they encode the text it was sent)."""

from __future__ import annotations

import json
from pathlib import Path

from ingestion.schema import Action, ToolCall, TraceState
from ingestion.store import StateWriter, load_states
from replay.ingest.names_wide import replace_run_wide
from teachers.pseudonyms import Pseudonyms

TOKENS = {"prompt_token_ids": [1, 2, 3], "completion_token_ids": [4], "session_id": "s"}


def _state(trace: str, turn: int, messages: list[dict], action: Action) -> TraceState:
    return TraceState(state_id=f"{trace}:{turn}", trace_id=trace, turn=turn, source="agl_spans",
                      messages=messages, tools=[{"type": "function", "function": {"name": "Priya"}}],
                      student_action=action, metadata=dict(TOKENS))


def _store(folder: Path) -> None:
    system = {"role": "system", "content": "You are a coding agent."}
    asked = {"role": "user", "content": "List the authors."}
    said = {"role": "tool", "tool_call_id": "Priya Raman", "content": "authors: Priya Raman, Priyanka"}
    call = ToolCall(id="c1", name="Priya", arguments={"path": "AUTHORS", "note": "cc Priya Raman"})
    with StateWriter(folder) as writer:
        writer.write(_state("a", 0, [system, asked], Action(content="Reading.")))
        writer.write(_state("b", 0, [system, asked], Action(content="ok", tool_calls=[call])))
        writer.write(_state("b", 1, [system, asked, said], Action(content="Done.")))


def test_names_go_everywhere_structure_stays_and_changed_states_lose_token_ids(tmp_path: Path) -> None:
    _store(tmp_path)
    settings = Pseudonyms(b"k")
    tag = f"person-{settings.tag('person_name', 'Priya Raman')}"
    replaced, dropped = replace_run_wide(tmp_path, ("Priya Raman",), settings)
    states = {s.state_id: s for s in load_states(tmp_path)}
    assert (replaced, dropped) == (1, 2)   # trace b, once; b:0 (its action), b:1 (its history)
    assert states["b:1"].messages[2] == {"role": "tool", "tool_call_id": "Priya Raman",
                                         "content": f"authors: {tag}, Priyanka"}
    assert states["b:0"].student_action.tool_calls[0].arguments == {"path": "AUTHORS", "note": f"cc {tag}"}
    assert states["b:0"].student_action.tool_calls[0].name == "Priya"   # a tool's name is structure
    assert states["b:0"].tools == [{"type": "function", "function": {"name": "Priya"}}]
    assert states["a:0"].metadata == TOKENS   # nothing of its changed
    for state_id in ("b:0", "b:1"):
        assert states[state_id].metadata == {**TOKENS, "prompt_token_ids": None, "completion_token_ids": None}


def test_no_name_in_the_store_leaves_its_bytes(tmp_path: Path) -> None:
    store = tmp_path / "out"
    _store(store)
    before = {p.name: p.read_bytes() for p in store.iterdir()}
    assert replace_run_wide(store, ("Sarah Chen", "Logan"), Pseudonyms(b"k")) == (0, 0)
    assert replace_run_wide(store, (), Pseudonyms(b"k")) == (0, 0)
    assert {p.name: p.read_bytes() for p in store.iterdir()} == before
    rewritten = tmp_path / "again"
    _store(rewritten)
    replace_run_wide(rewritten, ("Priya Raman",), Pseudonyms(b"k"))
    # a rewritten line is what the writer writes: the lines without the name are byte for byte the same
    old = (store / "traces.jsonl").read_bytes().splitlines()
    new = (rewritten / "traces.jsonl").read_bytes().splitlines()
    assert len(old) == len(new) and sum(a != b for a, b in zip(old, new, strict=True)) == 1
    assert json.loads(new[-1])["value"]["content"].startswith("authors: person-")
