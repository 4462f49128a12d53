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
from typing import Any

from ingestion.schema import make_state_id

SEPARATOR = "~"


@dataclass
class Seen:
    """What earlier files of a run gave: message ids (a resumed session copies its history: those
    turns give no second state) and state ids (a slot taken by other content)."""

    messages: set[str] = field(default_factory=set)
    states: set[str] = field(default_factory=set)

    @classmethod
    def tracking(cls) -> Seen:
        """A Seen for one file read apart from the others (replay/ingest/parallel.py): it remembers
        every id asked about, so the reading can be checked against what earlier files gave."""
        return cls(_Asked(), _Asked())

    def disjoint(self, other: Seen) -> bool:
        """Whether no id `other` (a tracking Seen) asked about is one of ours: then reading its file
        after ours gives what it gave alone.

        >>> alone = Seen.tracking(); "m1" in alone.messages
        False
        >>> Seen(messages={"m2"}).disjoint(alone), Seen(messages={"m1"}).disjoint(alone)
        (True, False)
        """
        return (self.messages.isdisjoint(getattr(other.messages, "asked", other.messages))
                and self.states.isdisjoint(getattr(other.states, "asked", other.states)))

    def update(self, other: Seen) -> None:
        self.messages.update(other.messages)
        self.states.update(other.states)


class _Asked(set):
    """A set that remembers every element asked about (`in`)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[Any] = set()

    def __contains__(self, item: object) -> bool:
        self.asked.add(item)
        return set.__contains__(self, item)

    def __reduce__(self) -> Any:  # pickled with what was asked: the worker's reading goes to the main
        return _rebuild_asked, (set(self), self.asked)


def _rebuild_asked(items: set[Any], asked: set[Any]) -> _Asked:
    out = _Asked()
    out.update(items)
    out.asked = asked
    return out


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
