"""Trace ids that stay unique across the files of a run, for every reader (Claude Code sessions and the
linear readers of other agents' logs).

A trace id is its `sessionId` (rule 4 of the reader), and turns are numbered per file. Two files can
carry one sessionId with different turns — a session copied from two machines, a restored backup, a
file whose first records were rewritten — and would then give two states one id. Ids key the cache,
the pairs, the ablation and the view, so the later trace takes a distinct id derived from its own
content: the same input gives the same ids on every run (files are read in sorted order).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from ingestion.schema import make_state_id

SEPARATOR = "~"


class Claim(NamedTuple):
    """One trace's turns, asked of the run's `Seen` before any of its states is built."""

    source: str
    trace_id: str
    turns: list[tuple[int, str]]   # (turn number, message key), in order


class Grant(NamedTuple):
    """What a claimed trace gives: its id (distinct if an earlier file took its state ids) and the
    turns to build, in order (the others repeat a message an earlier trace gave)."""

    trace_id: str
    turns: list[int]


@dataclass
class Seen:
    """What earlier traces of a run gave: message ids (a resumed session copies its history: those
    turns give no second state) and state ids (a slot taken by other content).

    Readers ask it through `claim` only, once per trace or once for all traces of a file, before they
    build a state: then the answers can come from another process, which settles the ids of every
    file in file order (replay/ingest/parallel.py) while the files are read at once."""

    messages: set[str] = field(default_factory=set)
    states: set[str] = field(default_factory=set)

    def claim(self, claims: list[Claim], last: bool = False) -> list[Grant]:
        """Settle `claims` in order (later ones see what earlier ones took). A turn whose message an
        earlier trace gave gives no state, nor does a second turn with the same key; the trace takes a
        distinct id when a state id of its new turns is taken. `last`: the file claims nothing more
        (lets another process settle the next file's sooner).

        >>> seen = Seen()
        >>> seen.claim([Claim("cc", "s1", [(0, "m1"), (1, "m2")])])
        [Grant(trace_id='s1', turns=[0, 1])]
        >>> seen.claim([Claim("cc", "s2", [(0, "m1"), (1, "m3")]), Claim("cc", "s1", [(0, "m9")])])
        [Grant(trace_id='s2', turns=[1]), Grant(trace_id='s1~60018f21', turns=[0])]
        """
        return [self._claim(claim) for claim in claims]

    def _claim(self, claim: Claim) -> Grant:
        messages, states = self.messages, self.states
        new = [(turn, key) for turn, key in claim.turns if key not in messages]
        if not new:
            return Grant(claim.trace_id, [])
        trace_id = distinct_trace_id(claim.source, claim.trace_id, new, states)
        states.update(make_state_id(claim.source, trace_id, turn) for turn, _key in new)
        turns = []
        for turn, key in new:
            if key not in messages:   # the first of two turns sharing a key gives the state
                messages.add(key)
                turns.append(turn)
        return Grant(trace_id, turns)


def distinct_trace_id(source: str, trace_id: str, turns: Iterable[tuple[int, str]],
                      taken: set[str]) -> str:
    """`trace_id`, or a stable distinct one when a state id of `turns` ((turn, message key) of the
    states about to be made) is already `taken` by other content.

    The new id is the old one and a hash of the first new message key, which no earlier file had.

    >>> taken = {"claude_code:s1:0", "claude_code:s1:1"}
    >>> distinct_trace_id("claude_code", "s1", [(2, "msg_c")], taken)
    's1'
    >>> distinct_trace_id("claude_code", "s1", [(1, "msg_x"), (2, "msg_y")], taken)
    's1~cae9b835'
    """
    turns = list(turns)
    if not any(make_state_id(source, trace_id, turn) in taken for turn, _key in turns):
        return trace_id
    base = f"{trace_id}{SEPARATOR}{hashlib.sha1(turns[0][1].encode()).hexdigest()[:8]}"
    candidate, n = base, 1
    while any(make_state_id(source, candidate, turn) in taken for turn, _key in turns):
        n += 1   # two keys whose hashes share 8 hex digits
        candidate = f"{base}-{n}"
    return candidate
