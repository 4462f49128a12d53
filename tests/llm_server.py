"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and benches.

It scripts replies with a Python callable and records every request body, so tests
drive litellm / the openai client through their real HTTP code path.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Reply:
    """What the server answers to one request."""

    body: dict[str, Any] | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Responder = Callable[[dict[str, Any]], Reply]


def chat_completion(content: str = "", tool_calls: list[dict[str, Any]] | None = None,
                    model: str = "m", prompt_tokens: int = 10, completion_tokens: int = 5,
                    **extra: Any) -> dict[str, Any]:
    """An OpenAI chat.completion body; tool call arguments given as dicts are JSON-encoded."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": call.get("id", f"call_{i}"), "type": "function",
             "function": {"name": call["name"],
                          "arguments": call["arguments"] if isinstance(call["arguments"], str)
                          else json.dumps(call["arguments"])}}
            for i, call in enumerate(tool_calls)
        ]
    choice: dict[str, Any] = {"index": 0, "message": message,
                              "finish_reason": "tool_calls" if tool_calls else "stop"}
    choice.update(extra.pop("choice_extra", {}))
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [choice],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}, **extra}


def error_body(message: str = "error", kind: str = "server_error", code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": kind, "code": code}}


def scripted(*replies: Reply) -> Responder:
    """A responder that answers with `replies` in order, then repeats the last one (thread-safe)."""
    lock = threading.Lock()
    remaining = list(replies)

    def respond(request: dict[str, Any]) -> Reply:
        with lock:
            return remaining.pop(0) if len(remaining) > 1 else remaining[0]

    return respond


class LoopbackServer:
    """A threaded HTTP server on a free port of 127.0.0.1, served while inside `with`; subclasses give
    `_handler()` and set their own fields before calling `super().__init__()`."""

    def __init__(self) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        # serve_forever polls for shutdown every 0.5 s by default: that was the cost of every `with`.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class LLMServer(LoopbackServer):
    """`with LLMServer(responder) as server:` → `server.url` is `http://127.0.0.1:PORT/v1`."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder or (lambda request: Reply(chat_completion("ok")))
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        super().__init__()

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # /v1/models, for clients that probe
                self._send(Reply({"object": "list", "data": [{"id": "m", "object": "model"}]}))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                body = json.loads(raw or b"{}")
                server._record(body, dict(self.headers))
                self._send(server.responder(body))

            def _send(self, reply: Reply) -> None:
                if reply.delay:
                    time.sleep(reply.delay)
                payload = json.dumps(reply.body if reply.body is not None else {}).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test); nothing to tell

        return Handler


def serve_forever(port: int, responder: Responder) -> None:
    """Run a server in the foreground (for subprocess tests and benches)."""
    server = LLMServer(responder)
    server._httpd.server_close()
    server._httpd = ThreadingHTTPServer(("127.0.0.1", port), server._handler())
    server._httpd.daemon_threads = True
    server._httpd.serve_forever()
