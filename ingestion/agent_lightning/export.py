"""A running agent-lightning 1.0 Gateway → a saved export (the I/O edge of the Gateway reader).

    python -m ingestion.agent_lightning.export --gateway http://HOST:PORT --out rollouts.agl.jsonl

pages through `GET /api/rollouts/terminal` (terminal rollouts, in the order they ended) and writes, per
rollout, its `GET /api/rollouts/{id}` and `GET /api/rollouts/{id}/events` answers as they came
(ingestion/agent_lightning/gateway.py reads them). `replay.run --source agl+http://HOST:PORT` does the
same into a cache file (~/.cache/teacher-replay/agl-gateway/) and reads that, so a live run and a run on
a saved export of the same rollouts give the same states, byte for byte. `$AGL_KEY` (the Gateway's own
setting) is sent as the bearer key when set.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson

from ingestion.agent_lightning.gateway import END, EXPORT, ROLLOUT, VERSION
from ingestion.schema import SourceError

PAGE = 500
_LIVE = re.compile(r"^agl\+(https?):/+(.+?)/*$")


def live_url(source: str | os.PathLike[str]) -> str | None:
    """The Gateway URL of a `--source agl+http://HOST:PORT` (also once made a path, `//` collapsed).

    >>> live_url("agl+http://127.0.0.1:8080"), live_url(Path("agl+http://h:1/")), live_url("x.jsonl")
    ('http://127.0.0.1:8080', 'http://h:1', None)
    """
    found = _LIVE.match(os.fspath(source))
    return f"{found.group(1)}://{found.group(2)}" if found else None


def export_lines(url: str) -> Iterator[bytes]:
    """The export of the Gateway at `url`, line by line; an unreachable Gateway, or an answer that is no
    Gateway's, is a SourceError (one line)."""
    import httpx

    key = os.environ.get("AGL_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as api:
        yield _line({"type": EXPORT, "version": VERSION, "gateway": url})
        after, count = 0, 0
        while True:
            page = _get(api, url, "/api/rollouts/terminal", {"after": after, "limit": PAGE})
            items = page.get("items") if isinstance(page, dict) else None
            if not isinstance(items, list) or not isinstance(page.get("next_after"), int):
                raise SourceError(f"--source agl+{url}: /api/rollouts/terminal answered no page of rollouts")
            for item in items:
                rollout_id = item.get("rollout_id") if isinstance(item, dict) else None
                try:
                    record = {"type": ROLLOUT, "rollout": _get(api, url, f"/api/rollouts/{rollout_id}"),
                              "events": _get(api, url, f"/api/rollouts/{rollout_id}/events")}
                except SourceError as error:   # deleted since it was listed: counted by the reader
                    record = {"type": ROLLOUT, "rollout_id": rollout_id, "error": str(error)}
                yield _line(record)
                count += 1
            if not items or page["next_after"] <= after:
                break
            after = page["next_after"]
        yield _line({"type": END, "rollouts": count})


def _get(api: object, url: str, path: str, params: dict[str, int] | None = None) -> object:
    import httpx

    try:
        answer = api.get(path, params=params)   # type: ignore[attr-defined]
    except httpx.HTTPError as error:
        raise SourceError(f"--source agl+{url}: the Gateway does not answer ({type(error).__name__}: "
                          f"{error})") from None
    if answer.status_code != 200:
        raise SourceError(f"--source agl+{url}: GET {path} answered HTTP {answer.status_code}")
    try:
        return answer.json()
    except ValueError:
        raise SourceError(f"--source agl+{url}: GET {path} answered no JSON") from None


def _line(value: object) -> bytes:
    return orjson.dumps(value) + b"\n"


def write_export(url: str, out: Path) -> Path:
    """The export of `url` written to `out` whole (under a temporary name, then renamed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        with open(partial, "wb") as handle:
            for line in export_lines(url):
                handle.write(line)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def live_export(url: str) -> Path:
    """Where a live source is fetched to before it is read: one file per Gateway URL, in the user's cache."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = hashlib.sha256(url.encode()).hexdigest()[:16]
    return write_export(url, cache / "teacher-replay" / "agl-gateway" / f"{name}.agl.jsonl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ingestion.agent_lightning.export",
        description="Save an agent-lightning 1.0 Gateway's terminal rollouts and their events, for "
                    "`replay.run --source FILE`.")
    parser.add_argument("--gateway", required=True, help="the Gateway's URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--out", required=True, type=Path, help="the export file to write (JSON Lines)")
    args = parser.parse_args(argv)
    try:
        write_export(live_url(args.gateway) or args.gateway.rstrip("/"), args.out)
    except (SourceError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
