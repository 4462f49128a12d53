"""`decided` against a table and against brute force over every way the remaining teachers can answer."""

from __future__ import annotations

import functools
import itertools

import pytest

from consensus.early_stop import decided, order_by_cost
from consensus.vote import vote
from ingestion.schema import Action, Proposal


@pytest.mark.parametrize("votes, remaining, min_agreement, expected", [
    (["ls", "ls"], 1, 0.5, True),                 # 3 teachers, 2 agree: the third cannot undo it
    (["ls"], 2, 0.5, False),
    (["ls", "pwd"], 1, 0.5, False),               # the third decides
    (["ls", "pwd", "cat"], 1, 0.5, True),         # no group can reach 3 of 4: decided abstain
    (["ls", "ls", "pwd"], 1, 0.5, False),         # 2 of 4 would be no majority
    (["ls", "ls", "ls"], 1, 0.5, True),
    (["ls", "ls"], 1, 0.7, False),                # 2 of 3 is not more than 0.7
    (["ls", "ls", "ls"], 1, 0.7, True),
    ([None, None], 1, 0.5, False),                # the last teacher alone would be a majority of one
    ([None, None], 0, 0.5, True),
    ([], 0, 0.5, True),
    ([None, "ls"], 1, 0.5, False),
    (["ls", None, "ls"], 1, 0.5, True),
    (["ls", "pwd", None], 0, 0.5, True),
])
def test_decided_table(votes, remaining, min_agreement, expected):
    assert decided(votes, remaining, min_agreement) is expected


@functools.cache
def _outcome(votes: tuple[str, ...], failed: int, min_agreement: float) -> str | None:
    # The outcome depends only on the multiset of votes, so callers pass them sorted and we cache.
    proposals = [Proposal(state_id="s", teacher=f"t{i}", model="m", action=Action(content=v))
                 for i, v in enumerate(votes)]
    proposals += [Proposal(state_id="s", teacher=f"f{i}", model="m", error="x") for i in range(failed)]
    result = vote(proposals, min_agreement=min_agreement, match="exact")  # decided() sees exact forms here
    return result.canonical if result.reached else None


def _final(votes, future, min_agreement: float) -> str | None:
    answers = [v for v in [*votes, *future] if v is not None]
    return _outcome(tuple(sorted(answers)), len(votes) + len(future) - len(answers), min_agreement)


@pytest.mark.parametrize("min_agreement", [0.5, 0.6, 0.75, 0.3])
def test_decided_matches_brute_force(min_agreement):
    symbols = ["x", "y", "z", None]
    for asked in range(0, 5):
        for remaining in range(0, 4):
            for votes in itertools.product(symbols, repeat=asked):
                futures = itertools.product(["x", "y", "z", "n1", "n2", "n3", None], repeat=remaining)
                outcomes = {_final(votes, future, min_agreement) for future in futures}
                forms = [None if v is None else f'{{"text":"{v}"}}' for v in votes]
                said = decided(forms, remaining, min_agreement)
                if said:  # sound for every threshold: never stops while the outcome can still change
                    assert len(outcomes) == 1, (votes, remaining, outcomes)
                elif min_agreement >= 0.5:  # and exact for majority thresholds
                    assert len(outcomes) > 1, (votes, remaining, outcomes)


def test_order_by_cost_cheapest_first_and_stable():
    costs = {"gpt-5": 1.25, "deepseek": 0.27, "qwen": 0.27, "gemini": 0.3}
    assert order_by_cost(["gpt-5", "qwen", "deepseek", "gemini"], costs.__getitem__) == [
        "qwen", "deepseek", "gemini", "gpt-5"]


# At the intent tier `replay.ask.answers` feeds `decided` intent keys: what it settles is the winning intent.
_COMMANDS = {"la": "ls -a", "lF": "ls -F", "pw": "pwd", "gs": "git status", "gS": "git status -s"}


@functools.cache
def _intent_outcome(votes: tuple[str, ...], failed: int) -> str | None:
    from consensus.intent import intent

    proposals = [Proposal(state_id="s", teacher=f"t{i}", model="m", action=Action(tool_calls=[
        {"id": "1", "name": "Bash", "arguments": {"command": _COMMANDS[v]}}])) for i, v in enumerate(votes)]
    proposals += [Proposal(state_id="s", teacher=f"f{i}", model="m", error="x") for i in range(failed)]
    result = vote(proposals)
    return intent(result.action) if result.reached else None


def test_decided_on_intent_keys_is_sound():
    from consensus.intent import intent

    def key(v: str | None) -> str | None:
        return None if v is None else intent(Action(tool_calls=[
            {"id": "1", "name": "Bash", "arguments": {"command": _COMMANDS[v]}}]))

    symbols = [*_COMMANDS, None]
    stopped = 0
    for asked in range(0, 4):
        for remaining in range(0, 3):
            for votes in itertools.product(symbols, repeat=asked):
                if not decided([key(v) for v in votes], remaining):
                    continue
                stopped += 1
                outcomes = set()
                for future in itertools.product(symbols, repeat=remaining):
                    answers = [v for v in [*votes, *future] if v is not None]
                    failed = len(votes) + remaining - len(answers)
                    outcomes.add(_intent_outcome(tuple(sorted(answers)), failed))
                assert len(outcomes) == 1, (votes, remaining, outcomes)
    assert stopped > 50  # it does stop early, e.g. at `ls -a`, `ls -F` with one teacher left
