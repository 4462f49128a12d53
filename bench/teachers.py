"""Teacher-pool throughput: TeacherPool against a bare `litellm.acompletion` loop, same server, same load.

    python bench/teachers.py [--calls 2000] [--concurrency 64] [--latency 0.05] [--server aiohttp]

The loopback server runs in its own process (so its CPU is not the client's) and answers every
request with one tool call after `--latency` seconds. `--server threading` uses tests/llm_server.py's
ThreadingHTTPServer instead, to see what that server alone costs. Each side runs in a fresh process,
after a warm-up (litellm's first call builds its clients); the best of `--repeat` runs counts.
Printed per side:

    wall       seconds for all calls
    efficiency (calls x latency / concurrency) / wall: 1.0 is a client that adds nothing
    cpu/call   client-process CPU (all threads) per call, ms
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.replay_server import serve_app, start_child  # noqa: E402
from tests.llm_server import chat_completion  # noqa: E402

REPLY = chat_completion("", tool_calls=[{"id": "call_1", "name": "Bash", "arguments": {"command": "ls -la"}}])


# --- the loopback servers (run with --serve in a child process) -----------------------------------

async def _serve_aiohttp(latency: float) -> None:
    from aiohttp import web

    body = json.dumps(REPLY).encode()

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(latency)
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    await serve_app(app)


def _serve_threading(latency: float) -> None:
    from tests.llm_server import LLMServer, Reply

    server = LLMServer(lambda request: Reply(REPLY, delay=latency))
    server._httpd.request_queue_size = 1024
    with server:
        print(server.url.rsplit(":", 1)[1].split("/")[0], flush=True)
        server._thread.join()


def start_server(kind: str, latency: float) -> tuple[subprocess.Popen[str], str]:
    return start_child([__file__, "--serve", kind, "--latency", str(latency)])


# --- the two clients ---------------------------------------------------------------------------------

def messages(i: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": f"task {i}: list the files in the repository"}]


async def bare_loop(url: str, calls: int, concurrency: int, offset: int) -> None:
    from teachers.llm import load_litellm

    litellm = load_litellm()
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            await litellm.acompletion(model="openai/m", messages=messages(i), api_base=url, api_key="test",
                                      timeout=60, num_retries=0, max_retries=0)

    await asyncio.gather(*(one(offset + i) for i in range(calls)))


async def pool_loop(url: str, calls: int, concurrency: int, offset: int, cache_dir: Path) -> dict[str, int]:
    from ingestion.schema import Action, TraceState
    from teachers import ResponseCache, TeacherPool, TeacherSpec

    spec = TeacherSpec(name="m", model="openai/m", api_base=url, api_key="test")
    cache = ResponseCache(cache_dir / f"cache-{offset}.sqlite")  # fresh: every call goes to the server
    pool = TeacherPool([spec], cache=cache, concurrency=concurrency, per_teacher=concurrency, timeout=60)
    states = [TraceState(state_id=f"bench:{offset + i}", trace_id="bench", turn=i, source="claude_code",
                         messages=messages(offset + i), student_action=Action(content="x"))
              for i in range(calls)]
    results = await asyncio.gather(*(pool.propose(state) for state in states))
    bad = sum(p.error is not None for proposals in results for p in proposals)
    return {"made": pool.stats.made, "cached": pool.stats.cached, "errors": bad}


def measure(side: str, url: str, calls: int, concurrency: int, latency: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        def client(n: int, offset: int) -> object:
            if side == "bare":
                return bare_loop(url, n, concurrency, offset)
            return pool_loop(url, n, concurrency, offset, Path(tmp))

        asyncio.run(client(2 * concurrency, 10**6))  # type: ignore[arg-type]
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        extra = asyncio.run(client(calls, 0))  # type: ignore[arg-type]
        wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    ideal = calls * latency / concurrency
    return {"wall_s": wall, "efficiency": ideal / wall, "cpu_ms_per_call": cpu / calls * 1000,
            **(extra or {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--server", choices=["aiohttp", "threading"], default="aiohttp")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--serve", choices=["aiohttp", "threading"], help=argparse.SUPPRESS)
    parser.add_argument("--side", choices=["bare", "pool"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        if args.serve == "aiohttp":
            asyncio.run(_serve_aiohttp(args.latency))
        else:
            _serve_threading(args.latency)
        return
    if args.side:
        print(json.dumps(measure(args.side, args.url, args.calls, args.concurrency, args.latency)))
        return

    child, url = start_server(args.server, args.latency)
    print(f"{args.calls} calls, concurrency {args.concurrency}, {args.latency * 1000:.0f} ms latency, "
          f"{args.server} server, {os.cpu_count()} cores; ideal wall "
          f"{args.calls * args.latency / args.concurrency:.2f} s")
    try:
        for side in ("bare", "pool"):
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run([sys.executable, __file__, "--side", side, "--url", url,
                                      "--calls", str(args.calls), "--concurrency", str(args.concurrency),
                                      "--latency", str(args.latency)], capture_output=True, text=True,
                                     cwd=ROOT, check=True)
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            best = min(runs, key=lambda r: r["wall_s"])
            extra = {k: v for k, v in best.items() if k not in ("wall_s", "efficiency", "cpu_ms_per_call")}
            print(f"{side:<6} wall {best['wall_s']:6.2f} s   efficiency {best['efficiency']:5.2f}   "
                  f"cpu/call {best['cpu_ms_per_call']:6.2f} ms" + (f"   {extra}" if extra else ""),
                  flush=True)
    finally:
        child.kill()
        child.wait()


if __name__ == "__main__":
    main()
