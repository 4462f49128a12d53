"""`--max-cost` as a hard cap: a call reserves before it is sent and settles when its answer is in.

A call is admitted when what was spent, plus the worst case of every call still in flight, plus this
call's *expected* cost fits under the cap; it then holds its *worst* case (no prompt-cache hit, the
whole output budget) until it settles at what it really cost. So when the last call is admitted, all
that can still be billed is at most the cap minus its expected cost plus its real cost: spend never
passes the cap by more than one call. A call that does not fit waits while others are in flight
(they may settle cheaper than they held) and gives up only when the spent money alone leaves no room.
"""

from __future__ import annotations

import asyncio
from typing import Any

from teachers.cost import Tokens, cost_of
from teachers.llm import load_litellm
from teachers.registry import TeacherSpec

_PROMPT_MARGIN = 1.25  # a provider's tokenizer may count more than ours
_OUTPUT_PARAMS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


def output_cap(teacher: TeacherSpec) -> int:
    """The most completion tokens one call can be billed for: the teacher's own cap, else the model's.

    >>> output_cap(TeacherSpec(name="a", model="gpt-5", params={"max_tokens": 4096}))
    4096
    """
    for name in _OUTPUT_PARAMS:
        if isinstance(teacher.params.get(name), int):
            return teacher.params[name]
    model = (teacher.price.as_model if teacher.price else None) or teacher.model
    try:
        return int(load_litellm().get_model_info(model).get("max_output_tokens") or 16_384)
    except Exception:  # not in the cost map
        return 16_384


def worst_case(teacher: TeacherSpec, prompt_tokens: int, batch: bool = False) -> float:
    """USD one call can cost at most: every prompt token uncached (and written, where writes cost more)
    and the whole output budget.

    >>> round(worst_case(TeacherSpec(name="a", model="gpt-5", params={"max_tokens": 1000}), 8_000), 4)
    0.0226
    """
    prompt = int(prompt_tokens * _PROMPT_MARGIN) + 64
    uncached = cost_of(teacher, Tokens(prompt, output_cap(teacher)), batch=batch)
    written = cost_of(teacher, Tokens(prompt, output_cap(teacher), cache_write=prompt), batch=batch)
    return max(uncached, written)


class Spend:
    """Money spent and held by the calls in flight, against an optional cap (USD)."""

    def __init__(self, cap: float | None = None) -> None:
        self.cap = cap
        self.spent = 0.0
        self.held = 0.0
        self.in_flight = 0
        self.largest_call = 0.0
        self._changed: asyncio.Condition | None = None
        self._loop: Any = None

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._changed is None or loop is not self._loop:  # a condition is bound to its loop
            self._changed, self._loop = asyncio.Condition(), loop
        return self._changed

    def fits(self, expected: float) -> bool | None:
        """True: admit now; None: wait for a call in flight to settle; False: the cap is reached.

        >>> s = Spend(1.0); s.fits(0.4), s.admit(0.4, 0.9), s.fits(0.4)
        (True, 0.9, None)
        """
        if self.cap is None or self.spent + self.held + expected <= self.cap:
            return True
        return None if self.in_flight and self.spent + expected <= self.cap else False

    def admit(self, expected: float, worst: float) -> float:
        """Hold `worst` for a call being sent (the caller checked `fits`); returns what is held."""
        hold = max(worst, expected)
        self.held += hold
        self.in_flight += 1
        return hold

    async def reserve(self, expected: float, worst: float) -> float | None:
        """Wait until the call fits, then hold its worst case; None when the cap leaves no room."""
        changed = self._condition()
        async with changed:
            while (verdict := self.fits(expected)) is None:
                await changed.wait()
            return self.admit(expected, worst) if verdict else None

    async def settle(self, held: float, actual: float) -> None:
        """Release what a call held and book what it cost (0.0 when it failed)."""
        self.held = max(self.held - held, 0.0)
        self.in_flight -= 1
        self.spent += actual
        self.largest_call = max(self.largest_call, actual)
        changed = self._condition()
        async with changed:
            changed.notify_all()
