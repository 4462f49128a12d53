"""A recording Anthropic Messages API proxy in front of an OpenAI-compatible server (the student's vLLM).

Claude Code speaks the Messages API to it. Each request is translated to a chat completion
(collect/proxy_translate.py, litellm's adapter), answered by the backend with vLLM's token extension
(`return_token_ids`, `logprobs`), translated back (as SSE when the CLI asked to stream: the whole
answer is produced, then streamed out), and recorded (format: ingestion/rollout_format.py): the translated
request, the response, prompt / completion token ids, logprobs, latency, and whether it was a turn of
the student (`main`) or a side request (titles, summaries, the "low" model's calls).

One proxy serves a whole run. A client's base URL is `http://HOST:PORT/<key>`: each key has its own
proxy.jsonl, so concurrent rollouts never share a file. The message id returned is `msg_<record id>`;
the CLI writes it into its session as `message.id`, which is how ingestion finds a turn's record.

Standalone, for a Claude Code of your own:
    python -m collect.proxy --backend-url http://localhost:8000/v1 \
        --backend-model Qwen/Qwen3-Coder-30B-A3B-Instruct --records proxy.jsonl --port 8082
    ANTHROPIC_BASE_URL=http://127.0.0.1:8082 ANTHROPIC_API_KEY=x ANTHROPIC_MODEL=claude-sonnet-4-6 \
        claude -p "..."
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from collect import proxy_translate as translate
from collect.proxy_records import RecordWriter, new_record_id
from collect.reply import echo_history, resolve_echo
from collect.student import RETRIES, Backend, ContextOverflow, StudentError
from ingestion.rollout_format import ProxyRecord
from ingestion.schema import StrictModel

log = logging.getLogger("collect")
MAX_BODY = 256 * 1024 * 1024           # a long session with pasted files is tens of MB
BACKEND_THREADS = 64                   # backend calls in flight at once (the clients are synchronous)


class ProxyConfig(StrictModel):
    backend_url: str | None            # OpenAI-compatible base URL, e.g. http://localhost:8000/v1
    api_key: str = "EMPTY"
    provider: str | None = None        # an official API through litellm (no token ids); None: vLLM
    models: dict[str, str] = Field(default_factory=dict)   # model name the CLI asks for → backend model
    urls: dict[str, str] = Field(default_factory=dict)     # model name → its server (default backend_url)
    default_backend: str               # the backend model for any other name
    main_models: list[str]             # names whose tool-calling requests are the student's turns
    temperature: float | None = None   # None: the server's default; the CLI's own values are not forwarded
    top_p: float | None = None
    max_tokens: int | None = None
    request_timeout: float = Field(600.0, gt=0)
    max_retries: int = Field(RETRIES, ge=0)   # collect.student's policy: connection errors, 429, 5xx
    reasoning_echo: Literal["auto", "field", "inline", "none"] = "auto"
    think_tags: tuple[str, str] = ("<think>", "</think>")


class ProxyError(Exception):
    pass


class AnthropicProxy:
    """`with AnthropicProxy(config, host) as proxy: url = proxy.route("key", Path("proxy.jsonl"))`."""

    def __init__(self, config: ProxyConfig, host: str = "127.0.0.1", port: int = 0,
                 backends: list[Backend] | None = None) -> None:
        self.config = config
        self.host = host
        self.port = port
        # One Backend per server, shared with the run (its probe, its token-extension switch, its report).
        self.backends = {backend.url: backend for backend in backends or []}
        self._routes: dict[str, RecordWriter] = {}
        # Per route, the arguments of each tool call as the student generated them (see restore_calls).
        self._generated: dict[str, dict[str, str]] = {}
        self._route_sampling: dict[str, dict[str, Any]] = {}   # per route, on top of the run's (a seed)
        self._main = frozenset(config.main_models)
        self._sampling = {key: value for key, value in
                          (("temperature", config.temperature), ("top_p", config.top_p),
                           ("max_tokens", config.max_tokens)) if value is not None}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._startup_error: BaseException | None = None
        self._pool = ThreadPoolExecutor(BACKEND_THREADS, thread_name_prefix="proxy-backend")

    def backend(self, url: str | None) -> Backend:
        """The server at `url` (one Backend per server: the token extension is switched per server)."""
        if url not in self.backends:
            self.backends[url] = Backend(url, self.config.api_key, self.config.provider,
                                         self.config.request_timeout, self.config.max_retries)
        return self.backends[url]

    @property
    def extension(self) -> bool:
        """The token extension of the default server."""
        return self.backend(self.config.backend_url).extension

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def route(self, key: str, records: Path, sampling: dict[str, Any] | None = None) -> str:
        """Record requests under `/<key>` to `records` (appended); the base URL a client should use.

        `sampling`: sent on top of the run's with this route's requests (a sample's `seed`)."""
        self._routes[key] = RecordWriter(records)
        self._generated[key] = {}
        self._route_sampling[key] = dict(sampling or {})
        return f"{self.url}/{key}" if key else self.url

    def unroute(self, key: str) -> RecordWriter | None:
        writer = self._routes.pop(key, None)
        self._generated.pop(key, None)
        self._route_sampling.pop(key, None)
        if writer is not None:
            writer.close()
        return writer

    def start(self) -> AnthropicProxy:
        translate.warm_up()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name="anthropic-proxy",
                                        daemon=True)
        self._thread.start()
        ready.wait()
        if self._startup_error is not None:
            raise ProxyError(f"cannot listen on {self.host}:{self.port}: {self._startup_error}")
        return self

    def close(self) -> None:
        thread, loop, stopped = self._thread, self._loop, self._stopped
        if thread is not None and thread.is_alive() and loop is not None and stopped is not None:
            loop.call_soon_threadsafe(stopped.set)
            thread.join(timeout=10)
        for key in list(self._routes):
            self.unroute(key)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> AnthropicProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the server, on its own thread and event loop ------------------------------------------------

    def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._run(ready))
        except BaseException as exc:  # a bind failure must reach start(), not die with the thread
            self._startup_error = exc
        finally:
            ready.set()
            self._loop.close()

    async def _run(self, ready: threading.Event) -> None:
        from aiohttp import web

        self._stopped = asyncio.Event()
        app = web.Application(client_max_size=MAX_BODY)
        for prefix in ("", "/{key}"):
            app.router.add_post(prefix + "/v1/messages", self._messages)
            app.router.add_post(prefix + "/v1/messages/count_tokens", self._count_tokens)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            await self._stopped.wait()
        finally:
            await runner.cleanup()

    async def _count_tokens(self, request: Any) -> Any:
        from aiohttp import web

        try:
            body = await request.json()
        except ValueError:
            body = {}
        tokens = translate.estimate_tokens(body if isinstance(body, dict) else {})
        return web.json_response({"input_tokens": tokens})

    async def _messages(self, request: Any) -> Any:
        from aiohttp import web

        key = request.match_info.get("key", "")
        writer = self._routes.get(key)
        if writer is None:
            return web.json_response(translate.error_body(404, f"no route {request.path}"), status=404)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            error = translate.error_body(400, "the body is not a Messages request")
            return web.json_response(error, status=400)
        try:
            record = await self._exchange(body, self._generated.setdefault(key, {}),
                                          self._route_sampling.get(key, {}))
        except Exception as exc:  # a bug costs the CLI one request (it retries), never the server
            log.exception("proxy: request failed")
            return web.json_response(translate.error_body(500, f"proxy error: {exc!r}"[:500]), status=500)
        writer.write(record)
        headers = {"request-id": record.request_id}
        if record.error is not None or record.anthropic_response is None:
            return web.json_response(translate.error_body(record.status, record.error or "no answer"),
                                     status=record.status, headers=headers)
        if not body.get("stream"):
            return web.json_response(record.anthropic_response, headers=headers)
        stream = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream",
                                             "Cache-Control": "no-cache"})
        await stream.prepare(request)
        for event in translate.sse_events(record.anthropic_response):
            await stream.write(event)
        await stream.write_eof()
        return stream

    async def _exchange(self, body: dict[str, Any], generated: dict[str, str],
                        sampling: dict[str, Any] | None = None) -> ProxyRecord:
        """Translate, ask the backend, translate back; every outcome becomes a record. `generated`: the
        route's tool-call arguments as the student wrote them (translate.restore_calls); `sampling`: the
        route's own, on top of the run's."""
        record_id = new_record_id()
        model = str(body.get("model") or "")
        role, reason = translate.classify(model, body, self._main)
        served = self.config.models.get(model, self.config.default_backend)
        backend = self.backend(self.config.urls.get(model, self.config.backend_url))
        record = ProxyRecord(id=record_id, message_id=f"msg_{record_id}", request_id=f"req_{record_id}",
                             role=role, side_reason=reason, model=model, backend_model=served,  # type: ignore[arg-type]
                             backend_url=backend.url, stream=bool(body.get("stream")), request={},
                             started_at=datetime.now(UTC).isoformat(timespec="milliseconds"))
        try:
            openai_request, tool_map = translate.to_openai(body, served,
                                                           {**self._sampling, **(sampling or {})})
        except Exception as exc:  # the adapter raises ValueError, KeyError, TypeError on malformed input
            record.status, record.error = 400, f"cannot translate the request: {exc!r}"[:500]
            return record
        # The CLI sends its thinking blocks back (the adapter makes them `reasoning_content`): they go to
        # the server the way its chat template reads them, as the mini agent's history does.
        style = resolve_echo(self.config.reasoning_echo, backend.reasoning_field)
        openai_request["messages"] = translate.restore_calls(
            echo_history(openai_request["messages"], style, self.config.think_tags), generated)
        record.request = openai_request
        started = time.monotonic()
        try:
            reply = await asyncio.get_running_loop().run_in_executor(self._pool, backend.send, openai_request)
        except ContextOverflow as exc:   # Anthropic's wording, which the CLI knows: "prompt is too long"
            record.status, record.error_kind = 400, "context_overflow"
            record.error = f"prompt is too long: {exc}"
        except StudentError as exc:
            record.status, record.error_kind, record.error = exc.status, "student_error", str(exc)
        record.latency_s = round(time.monotonic() - started, 3)
        if record.error is not None:
            return record
        completion = translate.with_reasoning_content(reply.body, reply.reasoning)
        try:
            record.anthropic_response = translate.to_anthropic(completion, tool_map, record.message_id, model)
        except (ValueError, TypeError, KeyError) as exc:
            record.status, record.error_kind = 502, "student_error"
            record.error = f"the student's response cannot be used: {exc}"[:500]
            return record
        generated.update((call["id"], call["function"]["arguments"]) for call in reply.tool_calls)
        record.response, record.reasoning = reply.message, reply.reasoning
        record.finish_reason, record.usage = reply.finish_reason, reply.usage
        record.prompt_token_ids, record.logprobs = reply.prompt_token_ids, reply.logprobs
        record.completion_token_ids, record.tokens = reply.completion_token_ids, reply.tokens
        return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m collect.proxy", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--backend-url", required=True, help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1")
    add("--backend-model", required=True, help="the served model that answers every request")
    add("--main-model", action="append", default=None,
        help="a model name whose tool-calling requests are turns (repeatable; default claude-sonnet-4-6)")
    add("--records", type=Path, required=True, help="proxy.jsonl to append to")
    add("--host", default="127.0.0.1")
    add("--port", type=int, default=8082)
    args = parser.parse_args(argv)
    config = ProxyConfig(backend_url=args.backend_url, default_backend=args.backend_model,
                         main_models=args.main_model or ["claude-sonnet-4-6"])
    try:
        with AnthropicProxy(config, args.host, args.port) as proxy:
            proxy.route("", args.records)
            print(f"listening on {proxy.url}", file=sys.stderr)
            threading.Event().wait()
    except ProxyError as exc:
        print(f"collect.proxy: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
