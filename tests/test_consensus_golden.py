"""The vote's decisions on bench/consensus.py's states, against digests taken from the tree before the
speed work of #29 (main at 9f43342): every result whole (groups, members, the winner's call id,
agreement, tiers, keys), so a faster vote that decides anything differently fails here.

Each case also names its decision counts, so a failure says what moved before the digest does.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable

import pytest

from bench.consensus import CWD, make_states
from consensus.intent_rules import IntentContext
from consensus.similarity import similarity
from consensus.vote import vote
from ingestion.schema import Proposal


def _states(n: int, teachers: int, seed: int, samples: int = 1) -> list[list[Proposal]]:
    # make_states draws call ids from the global generator: seeded here, and put back after.
    saved = random.getstate()
    random.seed(seed)
    try:
        states = make_states(n, teachers, seed, spelled=True)
    finally:
        random.setstate(saved)
    if samples == 1:
        return states
    # `samples` answers per teacher: weights of 1/samples, the vote's Fraction path.
    return [[p.model_copy(update={"teacher": f"teacher-{i // samples}", "sample": i % samples})
             for i, p in enumerate(ps)] for ps in states]


CASES: dict[str, tuple[Callable[[], list[list[Proposal]]], Callable[[list[Proposal]], object]]] = {
    "intent": (lambda: _states(1500, 4, 0), lambda ps: vote(ps, CWD)),
    "exact": (lambda: _states(1500, 4, 0), lambda ps: vote(ps, CWD, match="exact")),
    "similarity": (lambda: _states(300, 4, 0), lambda ps: similarity(ps, CWD)),
    "samples": (lambda: _states(600, 6, 1, samples=2), lambda ps: vote(ps, CWD)),
    "five, two thirds, history": (lambda: _states(600, 5, 2),
                                  lambda ps: vote(ps, CWD, min_agreement=2 / 3,
                                                  context=IntentContext(CWD, [{"role": "tool",
                                                                               "content": "setup.cfg"}]))),
    "no cwd": (lambda: _states(600, 4, 3), lambda ps: vote(ps)),
}

EXPECTED = {  # (decisions, sha256 of the results' JSON) from main at 9f43342; 964449d gives the same
    "exact": ({"no_majority/None": 387, "no_votes/None": 1, "reached/exact": 517, "tie/None": 595},
        "1794567b09d0c47872f94adcdf114f032bc5130a8463d2d35a44069019744f8d"),
    "five, two thirds, history": ({"no_majority/None": 243, "reached/exact": 154, "reached/intent": 153,
                                   "tie/None": 50},
        "46e7ef6e9726780ace80902601b34d8b50a9ea01890e1914255ccef970d5a28a"),
    "intent": ({"no_majority/None": 353, "no_votes/None": 1, "reached/exact": 517, "reached/intent": 363,
                "tie/None": 266},
        "33c71edc2ec896e3a3dcaa7e45b59dca4c2d5828d2017daa0ee6a5c9469e9d20"),
    "no cwd": ({"no_majority/None": 179, "reached/exact": 143, "reached/intent": 76, "tie/None": 202},
        "ba64b7fc3a46e4f4d43f67d7b0d6157f53981cd76f3525eab3a99b6453589dc6"),
    "samples": ({"no_majority/None": 161, "reached/exact": 197, "reached/intent": 187, "tie/None": 55},
        "41c2170b3647216944decda3d86463a431764cce4dcf110ef021a9aa6332d842"),
    "similarity": ({"no_majority/None": 71, "reached/exact": 100, "reached/similar": 3, "tie/None": 126},
        "8b5cce202667aee18ca3f5cadd3153c0e9a52b8851f2584cbb0cd153bcf72f84"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_decisions_match_the_tree_before(case: str) -> None:
    make, decide = CASES[case]
    results = [decide(ps) for ps in make()]
    counts = Counter(f"{'reached' if r.reached else r.reason}/{r.match}" for r in results)
    digest = hashlib.sha256("\n".join(r.model_dump_json() for r in results).encode()).hexdigest()
    counted, wanted = EXPECTED[case]
    assert dict(counts) == counted
    assert digest == wanted
