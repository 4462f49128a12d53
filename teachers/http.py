"""Teacher answers are read up to a size cap, never whole (`--max-response-mb`, default 10 MB).

litellm reaches providers through httpx in two ways, and each takes our transport the way litellm
accepts clients: providers served through the OpenAI SDK use `litellm.aclient_session` (an
`httpx.AsyncClient`), the others (anthropic, deepseek, openrouter, gemini, ...) take `client=` an
`AsyncHTTPHandler`, which accepts a `transport`. `CappedTransport` asks for an uncompressed answer,
refuses one whose Content-Length is over the cap before reading a byte, and wraps the body stream so
reading stops with `ResponseTooLarge` as soon as the cap is passed (a gzip answer is decompressed here,
counted after decompression). The cap of the call in progress is a context variable, so one transport
serves every pool; the real connections live in one httpx transport per event loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import urllib.request
import weakref
import zlib
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import Any

import httpx

MAX_RESPONSE_BYTES: contextvars.ContextVar[int] = contextvars.ContextVar("max_response_bytes",
                                                                         default=10_000_000)
TOO_LARGE = "response exceeds --max-response-mb"


class ResponseTooLarge(Exception):
    """A teacher's answer over the cap: a counted failure, never retried (it would only be as large)."""


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any, cap: int, gzip: bool) -> None:
        self._stream, self._cap = stream, cap
        self._decoder = zlib.decompressobj(wbits=zlib.MAX_WBITS | 32) if gzip else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._stream:
            while chunk:
                if self._decoder is None:
                    out, chunk = chunk, b""
                else:  # at most what the cap still allows, so a zip bomb never unfolds
                    out = self._decoder.decompress(chunk, self._cap - size + 1)
                    chunk = self._decoder.unconsumed_tail
                size += len(out)
                if size > self._cap:
                    raise ResponseTooLarge(f"{TOO_LARGE} ({self._cap} bytes)")
                if out:
                    yield out
                if self._decoder is not None and not out:
                    break

    async def aclose(self) -> None:
        await self._stream.aclose()


class CappedTransport(httpx.AsyncBaseTransport):
    """Wraps plain httpx transports (direct, or through the environment's proxy), one per event loop."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[Any, dict[str, httpx.AsyncHTTPTransport]] = \
            weakref.WeakKeyDictionary()

    def _inner(self, url: httpx.URL) -> httpx.AsyncHTTPTransport:
        transports = self._loops.setdefault(asyncio.get_running_loop(), {})
        proxy = urllib.request.getproxies().get(url.scheme)
        if proxy and urllib.request.proxy_bypass(url.host):
            proxy = None
        name = proxy or ""
        if name not in transports:
            transports[name] = httpx.AsyncHTTPTransport(proxy=proxy or None)
        return transports[name]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        cap = MAX_RESPONSE_BYTES.get()
        request.headers["accept-encoding"] = "identity"
        response = await self._inner(request.url).handle_async_request(request)
        length = response.headers.get("content-length", "")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if (length.isdigit() and int(length) > cap) or encoding not in ("identity", "", "gzip", "deflate"):
            await response.aclose()
            reason = f"{TOO_LARGE} ({cap} bytes)" if length.isdigit() and int(length) > cap \
                else f"{TOO_LARGE}: cannot bound a {encoding!r}-encoded answer"
            raise ResponseTooLarge(reason)
        headers = [(k, v) for k, v in response.headers.raw if k.lower() not in (b"content-encoding",)]
        return httpx.Response(status_code=response.status_code, headers=headers, request=request,
                              stream=_CappedStream(response.stream, cap, encoding in ("gzip", "deflate")),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        for transports in list(self._loops.values()):
            for transport in transports.values():
                await transport.aclose()


@lru_cache(maxsize=1)
def capped_transport() -> CappedTransport:
    return CappedTransport()


@lru_cache(maxsize=1)
def handler_client() -> Any:
    """The `client=` for providers litellm serves with its own AsyncHTTPHandler."""
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    return AsyncHTTPHandler(transport=capped_transport())


def install_sdk_client(litellm: Any) -> None:
    """`litellm.aclient_session` for providers served through the OpenAI SDK (set once)."""
    if not isinstance(getattr(litellm.aclient_session, "_transport", None), CappedTransport):
        litellm.aclient_session = httpx.AsyncClient(transport=capped_transport(), trust_env=False,
                                                    follow_redirects=True)


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
