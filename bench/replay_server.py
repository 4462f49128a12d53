"""The loopback teacher server the reliability benches share (run as a child process).

    python bench/replay_server.py --latency 0.3 --log FILE   # prints its port, then serves

aiohttp, so the server's own load does not bend the client's timings; answers are the tests' scripted
teachers (deterministic per model and prompt; `ta` and `tb` agree, so datasets have pairs). With
`--log`, one line per request when its answer is written: `answered_at arrived_at key` (Unix seconds,
key = tests.teacher_script.request_key), flushed at once, so a killed client leaves a complete log.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.teacher_script import request_key, scripted  # noqa: E402

if TYPE_CHECKING:
    from aiohttp import web


async def serve(latency: float, log: Path | None) -> None:
    import logging

    from aiohttp import web

    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)  # a killed client is the point here
    handle = open(log, "a", buffering=1) if log else None  # noqa: SIM115 - lives as long as the server

    async def answer(request: web.Request) -> web.Response:
        arrived = time.time()
        body = json.loads(await request.read())
        await asyncio.sleep(latency)
        reply = scripted(body, ("ta", "tb")).body
        if handle:
            handle.write(f"{time.time():.6f} {arrived:.6f} {request_key(body)}\n")
        return web.Response(body=json.dumps(reply).encode(), content_type="application/json")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", answer)
    await serve_app(app)


async def serve_app(app: web.Application) -> None:
    """Serve `app` on a free loopback port, print the port (the parent reads it), serve until killed."""
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


def start(latency: float, log: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """(child, base url) of a server started in its own process."""
    return start_child([__file__, "--latency", str(latency)] + (["--log", str(log)] if log else []))


def start_child(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    """(child, base url) of `python ARGS`, a server that prints its port first."""
    child = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    port = child.stdout.readline().strip() if child.stdout else ""
    if not port.isdigit():
        child.kill()
        raise SystemExit(f"loopback server did not start: {port!r}")
    return child, f"http://127.0.0.1:{port}/v1"


def read_log(log: Path) -> list[tuple[float, float, str]]:
    """(answered_at, arrived_at, key) per answered request."""
    if not log.exists():
        return []
    rows = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            rows.append((float(parts[0]), float(parts[1]), parts[2]))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--log", type=Path, default=None)
    options = parser.parse_args()
    asyncio.run(serve(options.latency, options.log))
