"""One pass over a text for every rule: which rules' regexes can match it at all (issue #29).

Real sessions mention `key`, `token`, `secret` and `password` everywhere, so gitleaks' keyword test lets
many rules through, and each then scans the whole text with RE2 to find nothing (on the shared fixtures
1,732 rule scans for 11 matches). Hyperscan (Vectorscan) compiles all rules into one automaton in
prefilter mode: it reports every rule that may match (never misses one; a construct it cannot run
exactly is widened), in one scan at memory speed. A rule then runs its own RE2 regex only when its
keyword occurs (gitleaks' semantics, unchanged) and the prefilter says it may match, so the output is
the same as without it. Compiling takes seconds, so the database is kept in the user cache dir, keyed
by the rules and the Hyperscan version; without Hyperscan (no wheel for the platform) every
keyword-selected rule runs, as before.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_FLAGS_NAMES = ("HS_FLAG_PREFILTER", "HS_FLAG_SINGLEMATCH", "HS_FLAG_ALLOWEMPTY")  # for rule regexes

Prefilter = Callable[[bytes], set[int]]


def _cache_file(patterns: Sequence[bytes], version: str) -> Path:
    import platformdirs

    digest = hashlib.sha256(b"\0".join([version.encode(), *patterns])).hexdigest()[:16]
    root = os.environ.get("REPLAY_PREFILTER_CACHE") or platformdirs.user_cache_dir("teacher-replay")
    return Path(root) / f"secret-prefilter-{digest}.hsdb"


def _compile(hyperscan: Any, patterns: Sequence[bytes], flags: Sequence[int]) -> tuple[Any, list[int]]:
    ids = list(range(len(patterns)))
    try:
        database = hyperscan.Database()
        database.compile(expressions=list(patterns), ids=ids, elements=len(ids), flags=list(flags))
        return database, ids
    except hyperscan.error:
        pass
    usable = []
    for i in ids:  # one at a time: a pattern Hyperscan rejects just goes unfiltered
        try:
            hyperscan.Database().compile(expressions=[patterns[i]], ids=[i], elements=1, flags=[flags[i]])
            usable.append(i)
        except hyperscan.error:
            continue
    database = hyperscan.Database()
    database.compile(expressions=[patterns[i] for i in usable], ids=usable, elements=len(usable),
                     flags=[flags[i] for i in usable])
    return database, usable


def _on_match(rule: int, start: int, end: int, flags: int, hits: set[int]) -> None:
    # One function for every scan, the hits handed in as the context: a closure made per scan was a
    # fifth of a scan's time on the short texts of real sessions (most of them).
    hits.add(rule)


def build(patterns: Sequence[bytes]) -> tuple[Prefilter, frozenset[int]] | None:
    """(scan, the indices it covers), or None without Hyperscan: `scan(data)` holds the index of every
    pattern (a rule's regex, in prefilter mode) that may match `data`. An index left uncovered (a
    pattern Hyperscan rejects) must be decided without the prefilter."""
    try:
        import hyperscan
    except ImportError:
        return None
    prefilter = 0
    for name in _FLAGS_NAMES:
        prefilter |= getattr(hyperscan, name)
    expressions = list(patterns)
    flags = [prefilter] * len(patterns)
    version = str(getattr(hyperscan, "__version__", "?"))
    path = _cache_file(expressions + [str(flags).encode()], version)
    database = None
    try:
        blob = path.read_bytes()
        covered = [int(x) for x in blob[:blob.index(b"\n")].split(b",") if x]
        database = hyperscan.loadb(blob[blob.index(b"\n") + 1:], hyperscan.HS_MODE_BLOCK)
    except (OSError, ValueError, hyperscan.error):
        database = None
    if database is None:
        database, covered = _compile(hyperscan, expressions, flags)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(",".join(map(str, covered)).encode() + b"\n" + hyperscan.dumpb(database))
            tmp.replace(path)
        except OSError:
            pass  # a read-only cache dir: compile again next time
    local = threading.local()  # a scratch space per thread: log scrubbing runs in any thread

    def scan(data: bytes) -> set[int]:
        hits: set[int] = set()
        scratch = getattr(local, "scratch", None)
        if scratch is None:
            scratch = local.scratch = hyperscan.Scratch(database)
        database.scan(data, match_event_handler=_on_match, context=hits, scratch=scratch)
        return hits

    return scan, frozenset(covered)
