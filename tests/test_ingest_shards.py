"""States written apart and appended (ingestion/shards.py) are the bytes one writer writes, wherever the
pieces are cut: between traces or inside one (its segment goes on), one or many per piece."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from ingestion.options import IngestOptions
from ingestion.schema import TraceState
from ingestion.shards import MergingWriter, ShardWriter
from ingestion.sources import iter_states
from ingestion.stats import IngestStats
from ingestion.store import STATES_FILE, TRACES_FILE, load_states, write_states


@pytest.fixture(scope="module")
def states(fixtures_root: Path) -> list[TraceState]:
    return list(iter_states(fixtures_root, IngestOptions(include_subagents=True), IngestStats()))


def merged(states: list[TraceState], cuts: list[int], folder: Path) -> tuple[bytes, bytes]:
    with MergingWriter(folder) as writer:
        for start, stop in zip([0, *cuts], [*cuts, len(states)], strict=True):
            piece = ShardWriter()
            for state in states[start:stop]:
                piece.write(state)
            writer.write_shard(piece.shard())
    return (folder / STATES_FILE).read_bytes(), (folder / TRACES_FILE).read_bytes()


def test_pieces_cut_anywhere_append_to_the_bytes_of_one_writer(states: list[TraceState],
                                                              tmp_path: Path) -> None:
    write_states(states, tmp_path / "one")
    expected = (tmp_path / "one" / STATES_FILE).read_bytes(), (tmp_path / "one" / TRACES_FILE).read_bytes()
    inside = [n for n in range(1, len(states)) if states[n].trace_id == states[n - 1].trace_id]
    assert len(inside) > 100
    rng = random.Random(39)
    for n, cuts in enumerate([inside[::7], sorted(rng.sample(range(1, len(states)), 40)),
                              list(range(1, len(states))), [len(states)]]):
        assert merged(states, cuts, tmp_path / f"m{n}") == expected
    # a piece that goes on in the trace of the one before, which went on from the one before it
    long = max((sum(1 for s in states if s.trace_id == t), t) for t in {s.trace_id for s in states})[1]
    at = [n for n, s in enumerate(states) if s.trace_id == long]
    cuts = [at[1], at[2], at[len(at) // 2]]
    assert merged(states, cuts, tmp_path / "chain") == expected
    assert [s.state_id for s in load_states(tmp_path / "chain")] == [s.state_id for s in states]


def test_a_recovery_is_set_in_the_last_row_as_one_process_sets_it(states: list[TraceState]) -> None:
    piece = ShardWriter()
    for state in states[:3]:
        piece.write(state)
    shard = piece.shard().with_recovery("claude_code:x:1")
    rows = shard.states.splitlines()
    last = orjson.loads(rows[-1])
    assert last["metadata"]["recovery"] == "claude_code:x:1" and list(last["metadata"])[-1] == "recovery"
    assert rows[:-1] == piece.shard().states.splitlines()[:-1]
    assert orjson.dumps(last) == rows[-1]
