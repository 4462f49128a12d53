"""An exec's output read whole by collect.runtime's docker client, without a docker engine (issue #47: a
verification branch's `grep` came back empty with exit code 0 under load; tests/test_exec_output_docker.py
is the same on a real engine).

A server on 127.0.0.1 answers `POST /exec/ID/start` as the engine does, the upgrade's headers and the
command's output in one write, as a command that answered before the client read its response leaves
them: the HTTP client's buffered reader takes both in with the headers, so only a reader that goes
through that buffer finds the output.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from collect.config import CollectConfig
from collect.runtime import docker_client

UPGRADED = (b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
            b"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
FOUND = b"./calc.py:2:    return a - b\n./calc.py:6:    return a - b\n"


def frame(stream: int, data: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


class _Engine(BaseHTTPRequestHandler):
    """The engine's ping and version; an exec start answered with the next of `server.bodies`."""

    def do_GET(self) -> None:
        body = b'{"ApiVersion": "1.41"}' if self.path.endswith("/version") else b"OK"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.wfile.write(UPGRADED + self.server.bodies.pop(0))   # type: ignore[attr-defined]
        self.close_connection = True   # one write above: the headers and the output come together

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[bytes]]]:
    """A loopback engine (DOCKER_HOST) that answers each exec start with the next body of the list it
    yields."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    server.bodies = []                                            # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"tcp://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("DOCKER_HOST", url)
    for name in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        monkeypatch.delenv(name, raising=False)
    yield url, server.bodies                                      # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


def client() -> Any:
    return docker_client(CollectConfig(instances="-", out="-", student_url="http://127.0.0.1:9/v1",
                                       student_model="m"))


def exec_output(api: Any, stream: bool) -> bytes:
    if stream:
        return b"".join(api.exec_start("e", stream=True))
    return api.exec_start("e")


@pytest.mark.parametrize("stream", [True, False])
def test_output_that_came_with_the_headers_is_kept(engine: tuple[str, list[bytes]], stream: bool) -> None:
    _, bodies = engine
    bodies.append(frame(1, FOUND))
    assert exec_output(client().api, stream) == FOUND


def test_docker_pys_own_reader_loses_it(engine: tuple[str, list[bytes]]) -> None:
    """Why the client is collect.runtime's: docker-py's reads the socket under that buffer."""
    import docker

    url, bodies = engine
    bodies.extend([frame(1, FOUND)] * 2)
    assert exec_output(docker.APIClient(base_url=url, version="1.41"), stream=True) == b""
    assert exec_output(docker.from_env().api, stream=False) == b""


def test_several_frames_of_both_streams_are_read_in_order(engine: tuple[str, list[bytes]]) -> None:
    _, bodies = engine
    bodies.append(frame(1, b"out\n") + frame(2, b"err\n") + frame(1, b"") + frame(1, b"more\n"))
    api = client().api
    assert exec_output(api, stream=True) == b"out\nerr\nmore\n"
    bodies.append(frame(1, b"out\n") + frame(2, b"err\n"))
    assert api.exec_start("e", demux=True) == (b"out\n", b"err\n")
