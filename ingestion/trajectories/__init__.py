"""Trajectories of other agents → TraceStates: mini-swe-agent, SWE-agent, OpenHands, Harbor ATIF, and
rows of trajectory datasets (formats.py says what each record holds). Every file is read through the
same framework as the session logs: records (load.py) → one `Conversation` per trajectory → states
(ingestion/linear.py). A record no format can read is a counted skip, never an exception.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ingestion.agent_tools import agent_name, agent_tools
from ingestion.budget import Budget
from ingestion.ids import Seen
from ingestion.linear import Conversation, conversation_states
from ingestion.options import IngestOptions
from ingestion.schema import TraceState
from ingestion.stats import IngestStats
from ingestion.trajectories import formats
from ingestion.trajectories.load import records

Reader = Callable[[dict[str, Any], Conversation, IngestStats], Any]
READERS: dict[str, Reader] = {"mini_swe_agent": formats.mini_swe_agent, "swe_agent": formats.swe_agent,
                              "openhands": formats.openhands, "atif": formats.atif,
                              "trajectory_dataset": formats.dataset_row}


def _trace_id(fmt: str, record: dict[str, Any], path: Path, number: int) -> str:
    """The trajectory's own id where it names one, else one from the file and record number."""
    named = record.get("session_id") or record.get("traj_id") or record.get("instance_id")
    if isinstance(named, str) and named:
        return named if fmt in ("atif",) else f"{named}:{number}" if number > 1 or fmt != "swe_agent" \
            else named
    return hashlib.sha1(f"{path}:{number}".encode()).hexdigest()[:16]


def trajectory_states(path: Path, fmt: str, options: IngestOptions, stats: IngestStats,
                      seen: Seen) -> Iterator[TraceState]:
    """Every state of one trajectory file (or saved dataset) of format `fmt`."""
    read = READERS[fmt]
    budget = Budget(options)
    for number, record in records(path, stats):
        stats.record_types[f"{fmt}.record"] += 1
        conversation = Conversation(_trace_id(fmt, record, path, number), fmt, {"agent": agent_name(fmt)},
                                    meta={"file": str(path), "record": number})
        try:
            defined = read(record, conversation, stats)
        except (TypeError, AttributeError, KeyError, ValueError) as error:
            # A record of the right shape at the top whose inside is not: skipped whole, with the reason.
            detail = f"{type(error).__name__}: {error}"[:200]
            stats.problem(str(path), number, "bad_trajectory", detail=detail)
            continue
        calls = [c for t in conversation.turns() for c in t.action.tool_calls]
        tools = defined or agent_tools(fmt, calls)
        yield from conversation_states(conversation, tools, options, stats, seen, budget)
