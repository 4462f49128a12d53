"""agent-lightning's rollouts → TraceStates: one state per LLM call, the student's reply as its action.

- `agl_spans` (spans.py): agent-lightning 0.3's span streams, the seed example's `stream_<id>.json`;
- `agl_gateway` (gateway.py): agent-lightning 1.0's Gateway, a saved export or `--source
  agl+http://HOST:PORT` live (export.py fetches it into an export first).

Both are told by their content (ingestion/detect.py). calls.py turns a call into a state the way
ingestion/rollouts.py does for collect/'s rollouts (token ids, log-probabilities, reward in metadata).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ingestion.agent_lightning.calls import Rollout, rollout_states
from ingestion.agent_lightning.gateway import END, EXPORT, ROLLOUT, gateway_rollout
from ingestion.agent_lightning.spans import span_rollouts
from ingestion.ids import Claim, Seen
from ingestion.jsonl import iter_records
from ingestion.schema import TraceState
from ingestion.stats import IngestStats


def agl_states(path: Path, found: str, stats: IngestStats, seen: Seen) -> Iterator[TraceState]:
    """The states of one span stream (`found` = agl_spans) or Gateway export (agl_gateway)."""
    skipped: Counter[str] = Counter()
    try:
        read = _span_file if found == "agl_spans" else _export_file
        rollouts = read(path, stats, skipped)
    except OSError as error:
        stats.problem(str(path), None, "unreadable_file", action="file", detail=error.strerror or str(error))
        return
    for reason, count in skipped.items():
        stats.skipped_turns[reason] += count
    for rollout in rollouts:
        yield from _claimed(rollout, stats, seen)


def _claimed(rollout: Rollout, stats: IngestStats, seen: Seen) -> Iterator[TraceState]:
    """A rollout's states, less the calls an earlier file gave (a stream or export read twice)."""
    if not rollout.calls:
        stats.skipped_traces["agl_no_calls"] += 1
        return
    keys = [(n, f"{rollout.source}:{rollout.rollout_id}:{call.extra.get('response_id') or n}")
            for n, call in enumerate(rollout.calls)]
    grant = seen.claim([Claim(rollout.source, rollout.rollout_id, keys)])[0]
    if not grant.turns:
        stats.skipped_traces["agl_duplicate_rollout"] += 1
        return
    stats.traces += 1
    built = set(grant.turns)
    for state in rollout_states(rollout):
        if state.turn in built:
            stats.states += 1
            yield state
        else:
            stats.skipped_turns["duplicate_message_id"] += 1


def _span_file(path: Path, stats: IngestStats, skipped: Counter[str]) -> list[Rollout]:
    spans = []
    for _number, record in iter_records(path, stats):
        if not isinstance(record.get("rollout_id"), str):   # a piece of a broken line the reader recovered
            stats.skipped_records["not_a_span"] += 1
            continue
        stats.record_types[str(record.get("name"))] += 1
        spans.append(record)
    return span_rollouts(spans, skipped)


def _export_file(path: Path, stats: IngestStats, skipped: Counter[str]) -> list[Rollout]:
    rollouts, gateway, ended = [], None, False
    for number, record in iter_records(path, stats):
        kind = record.get("type")
        stats.record_types[str(kind)] += 1
        if kind == EXPORT:
            gateway = record.get("gateway")
        elif kind == END:
            ended = True
        elif kind == ROLLOUT and "error" in record:
            stats.problem(str(path), number, "agl_rollout_unavailable", detail=str(record["error"]))
        elif kind == ROLLOUT:
            traces: Counter[str] = Counter()
            rollout = gateway_rollout(record, gateway, skipped, traces)
            for reason, count in traces.items():
                if reason == "agl_bad_rollout_record":   # a line of the file: counted with where it is
                    stats.problem(str(path), number, reason)
                else:
                    stats.skipped_traces[reason] += count
            if rollout is not None:
                rollouts.append(rollout)
        else:
            stats.skipped_records[str(kind)] += 1
    if not ended:   # a copy cut short: the rollouts before the cut are whole
        stats.problem(str(path), None, "agl_export_cut_short", action="repaired")
    return rollouts
