"""Teacher answers are read up to a size cap, never whole (`--max-response-mb`, default 10 MB).

litellm reaches providers through httpx in two ways, and each takes our transport the way litellm
accepts clients: providers served through the OpenAI SDK use `litellm.client_session` (an `httpx.Client`)
for the sync `litellm.completion` the pool calls on its worker threads, and `litellm.aclient_session` (an
`httpx.AsyncClient`) for the async file and batch calls of `--batch`; the others (anthropic, deepseek,
openrouter, gemini, ...) take `client=` an `HTTPHandler` (an `httpx.Client`).
`CappedTransport` (and `SyncCappedTransport`) asks for an uncompressed answer,
refuses one whose Content-Length is over the cap before reading a byte, and wraps the body stream so
reading stops with `ResponseTooLarge` as soon as the cap is passed (a gzip answer is decompressed here,
counted after decompression). The cap of the call in progress is a context variable, so one transport
serves every pool; the real connections live in one httpx transport per event loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import urllib.request
import weakref
import zlib
from collections.abc import AsyncIterator, Iterator
from functools import lru_cache
from typing import Any

import httpx

MAX_RESPONSE_BYTES: contextvars.ContextVar[int] = contextvars.ContextVar("max_response_bytes",
                                                                         default=10_000_000)
TOO_LARGE = "response exceeds --max-response-mb"


class ResponseTooLarge(Exception):
    """A teacher's answer over the cap: a counted failure, never retried (it would only be as large)."""


class _Budget:
    """The bytes of one answer counted (after decompression) against the cap, chunk by chunk."""

    def __init__(self, cap: int, gzip: bool) -> None:
        self._cap, self._size = cap, 0
        self._decoder = zlib.decompressobj(wbits=zlib.MAX_WBITS | 32) if gzip else None

    def take(self, chunk: bytes) -> Iterator[bytes]:
        while chunk:
            if self._decoder is None:
                out, chunk = chunk, b""
            else:  # at most what the cap still allows, so a zip bomb never unfolds
                out = self._decoder.decompress(chunk, self._cap - self._size + 1)
                chunk = self._decoder.unconsumed_tail
            self._size += len(out)
            if self._size > self._cap:
                raise ResponseTooLarge(f"{TOO_LARGE} ({self._cap} bytes)")
            if out:
                yield out
            if self._decoder is not None and not out:
                break


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any, cap: int, gzip: bool) -> None:
        self._stream, self._budget = stream, _Budget(cap, gzip)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            for out in self._budget.take(chunk):
                yield out

    async def aclose(self) -> None:
        await self._stream.aclose()


class _CappedSyncStream(httpx.SyncByteStream):
    def __init__(self, stream: Any, cap: int, gzip: bool) -> None:
        self._stream, self._budget = stream, _Budget(cap, gzip)

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            yield from self._budget.take(chunk)

    def close(self) -> None:
        self._stream.close()


def _refusal(response: httpx.Response, cap: int) -> str | None:
    """Why an answer is refused before a byte of it is read: its length, or an encoding we cannot bound."""
    length = response.headers.get("content-length", "")
    encoding = _encoding(response)
    if length.isdigit() and int(length) > cap:
        return f"{TOO_LARGE} ({cap} bytes)"
    if encoding not in ("identity", "", "gzip", "deflate"):
        return f"{TOO_LARGE}: cannot bound a {encoding!r}-encoded answer"
    return None


def _capped(response: httpx.Response, request: httpx.Request,
            stream: type[_CappedStream] | type[_CappedSyncStream], cap: int) -> httpx.Response:
    """The answer with its body read through the cap (decompressed here, so no content-encoding left)."""
    headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-encoding"]
    gzip = _encoding(response) in ("gzip", "deflate")
    return httpx.Response(status_code=response.status_code, headers=headers, request=request,
                          stream=stream(response.stream, cap, gzip), extensions=response.extensions)


def _encoding(response: httpx.Response) -> str:
    return response.headers.get("content-encoding", "identity").strip().lower()


def _proxy(url: httpx.URL) -> str | None:
    proxy = urllib.request.getproxies().get(url.scheme)
    return None if proxy and urllib.request.proxy_bypass(url.host) else proxy


class CappedTransport(httpx.AsyncBaseTransport):
    """Wraps plain httpx transports (direct, or through the environment's proxy), one per event loop."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[Any, dict[str, httpx.AsyncHTTPTransport]] = \
            weakref.WeakKeyDictionary()

    def _inner(self, url: httpx.URL) -> httpx.AsyncHTTPTransport:
        transports = self._loops.setdefault(asyncio.get_running_loop(), {})
        proxy = _proxy(url)
        name = proxy or ""
        if name not in transports:
            transports[name] = httpx.AsyncHTTPTransport(proxy=proxy or None)
        return transports[name]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        cap = MAX_RESPONSE_BYTES.get()
        request.headers["accept-encoding"] = "identity"
        response = await self._inner(request.url).handle_async_request(request)
        if reason := _refusal(response, cap):
            await response.aclose()
            raise ResponseTooLarge(reason)
        return _capped(response, request, _CappedStream, cap)

    async def aclose(self) -> None:
        for transports in list(self._loops.values()):
            for transport in transports.values():
                await transport.aclose()


class SyncCappedTransport(httpx.BaseTransport):
    """The same cap for sync clients (the pool's worker threads); httpx's transport is thread-safe."""

    def __init__(self) -> None:
        self._inner: dict[str, httpx.HTTPTransport] = {}
        self._lock = threading.Lock()

    def _transport(self, url: httpx.URL) -> httpx.HTTPTransport:
        proxy = _proxy(url)
        with self._lock:
            if (proxy or "") not in self._inner:
                self._inner[proxy or ""] = httpx.HTTPTransport(proxy=proxy or None)
            return self._inner[proxy or ""]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        cap = MAX_RESPONSE_BYTES.get()
        request.headers["accept-encoding"] = "identity"
        response = self._transport(request.url).handle_request(request)
        if reason := _refusal(response, cap):
            response.close()
            raise ResponseTooLarge(reason)
        return _capped(response, request, _CappedSyncStream, cap)

    def close(self) -> None:
        for transport in self._inner.values():
            transport.close()


@lru_cache(maxsize=1)
def capped_transport() -> CappedTransport:
    return CappedTransport()


@lru_cache(maxsize=1)
def sync_capped_client() -> httpx.Client:
    return httpx.Client(transport=SyncCappedTransport(), trust_env=False, follow_redirects=True)


@lru_cache(maxsize=1)
def sync_handler_client() -> Any:
    """The `client=` for providers litellm serves with its own HTTPHandler, on the sync path."""
    from litellm.llms.custom_httpx.http_handler import HTTPHandler

    return HTTPHandler(client=sync_capped_client())


def install_sdk_client(litellm: Any) -> None:
    """`litellm.aclient_session` and `litellm.client_session` for providers served through the OpenAI
    SDK (set once)."""
    if not isinstance(getattr(litellm.aclient_session, "_transport", None), CappedTransport):
        litellm.aclient_session = httpx.AsyncClient(transport=capped_transport(), trust_env=False,
                                                    follow_redirects=True)
    if litellm.client_session is not sync_capped_client():
        litellm.client_session = sync_capped_client()


def is_too_large(error: BaseException | None) -> bool:
    """Whether a failure (however litellm and the SDK wrapped it) was the size cap.

    >>> is_too_large(RuntimeError("APIConnectionError: " + TOO_LARGE)), is_too_large(ValueError("x"))
    (True, False)
    """
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, ResponseTooLarge) or TOO_LARGE in str(error):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False
