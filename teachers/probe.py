"""A start-up probe per distinct teacher endpoint, so a run against an endpoint that refuses connections
ends in seconds with one line instead of retrying every call (#28).

The probe is the cheapest request an OpenAI-compatible endpoint accepts: `GET {api_base}/models`, sent
without a key (any HTTP answer, 401 included, proves the endpoint is there; nothing is billed). Only
connection failures (refused, unresolvable, no answer within `timeout`) count as unreachable. Teachers
on a provider's own API (no api_base) are not probed: the circuit breaker (`teachers.breaker`) covers
them during the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ingestion.schema import ReplayError
from teachers.registry import TeacherSpec


class AllUnreachable(ReplayError):
    """No teacher can be reached: the run stops before anything is made (exit 1, OUT untouched)."""


async def _probe(base: str, timeout: float) -> str | None:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            await client.get(base.rstrip("/") + "/models")
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL) as error:
        return f"{type(error).__name__} at {base}"
    except httpx.HTTPError:  # it answered something (a slow read, a reset after connecting): it is there
        return None
    return None


def unreachable(teachers: Sequence[TeacherSpec], timeout: float = 5.0) -> dict[str, str]:
    """Teacher name -> why its endpoint cannot be reached; one probe per distinct api_base, concurrently.

    >>> unreachable([TeacherSpec(name="a", model="openai/m", api_base="http://127.0.0.1:9/v1")])
    {'a': 'ConnectError at http://127.0.0.1:9/v1'}
    """
    bases = sorted({t.api_base for t in teachers if t.api_base})
    if not bases:
        return {}

    async def all_probes() -> list[str | None]:
        return list(await asyncio.gather(*(_probe(base, timeout) for base in bases)))

    found = dict(zip(bases, asyncio.run(all_probes()), strict=True))
    return {t.name: found[t.api_base] for t in teachers if t.api_base and found[t.api_base]}


def check_reachable(teachers: Sequence[TeacherSpec], timeout: float = 5.0) -> dict[str, str]:
    """The unreachable teachers (to stop at once), or `AllUnreachable` naming them when none is left."""
    down = unreachable(teachers, timeout)
    if teachers and len(down) == len(teachers):
        named = "; ".join(f"{name} ({why})" for name, why in down.items())
        raise AllUnreachable(f"no teacher can be reached: {named}"
                             + " — is the server running and the address right? Nothing was asked.")
    return down
