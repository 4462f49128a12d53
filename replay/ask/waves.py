"""`--trace-parallel`: up to K states of one trace in flight, sent in waves so each finds in the provider's
prompt cache the prefix it shares with an earlier state (#28).

One trace's requests each extend the one before. Asked one after another, every request reads all of the
previous one from the cache and pays full price only for what is new: a 500-turn session takes 500
latencies. In waves, the states of a wave are sent together once the wave before has been answered: each
reads the previous wave's last request from the cache and pays full price for everything after it (so a
wave of K pays about (K+1)/2 times the new part of sequential asking), for about 1/K of the latencies.

`auto` picks each wave's size from the trace's own lengths: states join a wave (up to `AUTO_LIMIT`) while
the wave's prompt cost stays within `MARGIN` of asking them one by one, priced at the pool's cheapest
cached-to-full ratio. Long traces with small steps get large waves; a trace's first state is sent alone.
"""

from __future__ import annotations

from typing import Any

import orjson

AUTO_LIMIT = 8
MARGIN = 0.10  # the cost margin `auto` allows over one-by-one asking (prompt side)


def wave_cost(base: int, sizes: list[int], ratio: float) -> float:
    """Prompt cost (in full-price characters) of `sizes` sent together after a request of `base`.

    >>> wave_cost(1000, [1100, 1200], 0.1)
    500.0
    """
    return sum(ratio * base + (size - base) for size in sizes)


def serial_cost(previous: int, sizes: list[int], ratio: float) -> float:
    """The same states asked one by one, each after the one before.

    >>> serial_cost(1000, [1100, 1200], 0.1)
    410.0
    """
    total, before = 0.0, previous
    for size in sizes:
        total += ratio * before + (size - before)
        before = size
    return total


def joins(base: int, wave: list[int], size: int, limit: int, margin: float | None, ratio: float) -> bool:
    """Whether a state of `size` may join `wave` (sizes of the states already in it, sent after `base`).
    `margin` None: an explicit K, always while there is room.

    >>> joins(100_000, [101_000], 102_000, 8, 0.1, 0.1), joins(0, [5_000], 6_000, 8, 0.1, 0.1)
    (True, False)
    >>> joins(100_000, [101_000], 60_000, 8, None, 0.1)  # a trimmed history starts a wave of its own
    False
    """
    if len(wave) >= limit or size <= (wave[-1] if wave else base):
        return False  # full, or the trace's history was trimmed: nothing of it is known to be shared
    if margin is None:
        return True
    members = [*wave, size]
    return wave_cost(base, members, ratio) <= (1 + margin) * serial_cost(base, members, ratio)


def plan(sizes: list[int], limit: int, margin: float | None, ratio: float) -> list[list[int]]:
    """The waves (state indexes) of one trace of `sizes`, as `replay.decide.states` sends them.

    >>> plan([1000, 50_000, 50_500, 51_000, 51_500], 4, 0.1, 0.1)
    [[0], [1], [2, 3, 4]]
    >>> plan([10, 20, 30, 40, 50], 2, None, 0.1)
    [[0], [1, 2], [3, 4]]
    """
    waves: list[list[int]] = []
    base = 0
    for index, size in enumerate(sizes):
        wave = [sizes[i] for i in waves[-1]] if waves else []
        if waves and waves[-1][0] != 0 and joins(base, wave, size, limit, margin, ratio):
            waves[-1].append(index)
            continue
        if waves:
            base = sizes[waves[-1][-1]]
        waves.append([index])
    return waves


def prompt_size(state: Any) -> int:
    """A state's prompt in characters of JSON: the waves' measure (only ratios of sizes matter)."""
    return len(orjson.dumps(state.messages)) + len(orjson.dumps(state.tools))


class Planner:
    """`plan` one state at a time, in turn order per trace (a dry run streams its states): `place` says
    whether a state starts a new wave; `waves` counts them per trace.

    >>> p = Planner(4, 0.1, 0.1); [p.place("t", n) for n in (1000, 50_000, 50_500, 51_000, 51_500)]
    [True, True, True, False, False]
    """

    def __init__(self, limit: int, margin: float | None, ratio: float) -> None:
        self.limit, self.margin, self.ratio = limit, margin, ratio
        self._trace: str | None = None
        self._base, self._wave, self._first = 0, [], True
        self.waves: dict[str, int] = {}
        self.states: dict[str, int] = {}

    def place(self, trace: str, size: int) -> bool:
        if trace != self._trace:
            self._trace, self._base, self._wave, self._first = trace, 0, [], True
        self.states[trace] = self.states.get(trace, 0) + 1
        if not self._first and self._wave and joins(self._base, self._wave, size, self.limit, self.margin,
                                                    self.ratio):
            self._wave.append(size)
            return False
        if self._wave:
            self._base, self._first = self._wave[-1], False
        self._wave = [size]
        self.waves[trace] = self.waves.get(trace, 0) + 1
        return True


LATENCY_ASSUMED = 10.0  # seconds per call, for the dry run's time figures (reasoning teachers: more)


def estimate_waves(pool: Any, out: Any, trace_parallel: int | None, usd_one: float) -> dict[str, Any]:
    """Dry run: USD and hours of asking for K = 1 (`usd_one`, the run's estimate) and for the K in use
    (`auto`: chosen per wave), the prompt cache modelled per wave (`TeacherPool.estimate_wave`).
    Time: the waves of the traces in flight at once (`--concurrency` traces, at least 4), each wave one
    call latency."""
    from replay.select.filters import asked_states

    limit, margin = (AUTO_LIMIT, MARGIN) if trace_parallel is None else (max(trace_parallel, 1), None)
    ratio = pool.cached_price_ratio()
    one, chosen = Planner(1, None, ratio), Planner(limit, margin, ratio)
    usd = 0.0
    for state in asked_states(out):
        size = prompt_size(state)
        one.place(state.trace_id, size)
        usd += pool.estimate_wave(state, chosen.place(state.trace_id, size))
    slots = max(pool.concurrency, 4)

    def hours(waves: dict[str, int]) -> float:
        longest = max(waves.values(), default=0)
        return round(max(longest, sum(waves.values()) / slots) * LATENCY_ASSUMED / 3600, 3)

    return {"k": "auto" if trace_parallel is None else limit, "cost_margin": margin,
            "waves": sum(chosen.waves.values()), "states": sum(chosen.states.values()),
            "k1": {"cost_usd": round(usd_one, 6), "hours": hours(one.waves)},
            "chosen": {"cost_usd": round(usd, 6), "hours": hours(chosen.waves)},
            "latency_assumed_s": LATENCY_ASSUMED}
