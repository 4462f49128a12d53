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


def _parallel(n: int, seed: int) -> list[list[Proposal]]:
    """Each answer with its neighbour's calls beside its own, in either order: parallel calls, which
    compare as a multiset."""
    rng = random.Random(seed)
    out = []
    for ps in _states(n, 4, seed):
        acted = [p for p in ps if p.action is not None and p.action.tool_calls]
        joined = []
        for k, p in enumerate(ps):
            if p.action is None or not acted:
                joined.append(p)
                continue
            calls = [*p.action.tool_calls, *acted[(k + 1) % len(acted)].action.tool_calls]
            rng.shuffle(calls)
            joined.append(p.model_copy(update={"action": p.action.model_copy(update={"tool_calls": calls})}))
        out.append(joined)
    return out


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
    "parallel calls": (lambda: _parallel(600, 4), lambda ps: vote(ps, CWD)),
}

EXPECTED = {  # (decisions, sha256 of the results' JSON) from main at 9f43342; 964449d gives the same
    "exact": ({"no_majority/None": 387, "no_votes/None": 1, "reached/exact": 517, "tie/None": 595},
        "09d504e57b5843bfbac88f3b3004c43a5ce9d630d64fa14e903364174130b03c"),
    "five, two thirds, history": ({"no_majority/None": 243, "reached/exact": 154, "reached/intent": 153,
                                   "tie/None": 50},
        "9e5ae9477b5f83d7c4c1d9cd7731a76472616fd5a784c00eef2fc14a4c2aa59a"),
    "intent": ({"no_majority/None": 353, "no_votes/None": 1, "reached/exact": 517, "reached/intent": 363,
                "tie/None": 266},
        "593a325ddb02d3cb159adf64f6d8cc269a7b41dd44101635298fe422b0e97b9c"),
    "no cwd": ({"no_majority/None": 179, "reached/exact": 143, "reached/intent": 76, "tie/None": 202},
        "4abcd12e94759d31ec41f69b884e78e747de2e4ec701a6c150c51160c8094999"),
    "parallel calls": ({"no_majority/None": 84, "reached/exact": 206, "reached/intent": 64, "tie/None": 246},
        "45630313cef1f6399ef8ae5f3aaffeccf7613facc971f319d6b291342817d455"),
    "samples": ({"no_majority/None": 161, "reached/exact": 197, "reached/intent": 187, "tie/None": 55},
        "00592a9124ce623f8c8e9e58e696e27eff249c69443c4aa1d2af9635eda8e9b4"),
    "similarity": ({"no_majority/None": 71, "reached/exact": 100, "reached/similar": 3, "tie/None": 126},
        "b98eea8b5c80ea60ba236e5833510f84127098f9aa362b913c72c764cec10faf"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_decisions_match_the_tree_before(case: str) -> None:
    make, decide = CASES[case]
    results = [decide(ps) for ps in make()]
    counts = Counter(f"{'reached' if r.reached else r.reason}/{r.match}" for r in results)
    # Unset fields too (exclude_unset reads them): a result built another way must set the same ones.
    dumps = (r.model_dump_json() + r.model_dump_json(exclude_unset=True) for r in results)
    digest = hashlib.sha256("\n".join(dumps).encode()).hexdigest()
    counted, wanted = EXPECTED[case]
    assert dict(counts) == counted
    assert digest == wanted
