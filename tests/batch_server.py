"""A loopback batch API: OpenAI Batch (files + batches) and Anthropic Message Batches, as their API
references and SDK types describe them (openai/types/batch.py, file_object.py; the BatchRequestOutput
line of the OpenAPI spec; anthropic/types/messages/message_batch*.py), plus plain chat completions.

- `POST /v1/files` (multipart: file, purpose) → File; `GET /v1/files/{id}`; `GET /v1/files/{id}/content`.
- `POST /v1/batches` (input_file_id, endpoint, completion_window, metadata) → Batch, `validating`;
  `GET /v1/batches/{id}`: `in_progress` while held, then `completed` with `output_file_id`: one line per
  request, `{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`.
- `POST /v1/messages/batches` (requests: custom_id + params) → MessageBatch, `in_progress`;
  `GET /v1/messages/batches/{id}`: `ended` with `results_url` once released;
  `GET /v1/messages/batches/{id}/results`: `{"custom_id", "result": {"type": "succeeded", "message"}}`.

Batches finish on the first retrieve after `release()` (or at once when built with `hold=False`).
`GET /v1/batches` lists them (newest first); `lose_created=N` drops the answer to the next N creates.
`answer(body)` scripts each request's chat.completion, exactly as for a direct call (`POST
.../chat/completions`, or `POST /v1/messages` as an Anthropic message).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.caching_server import anthropic_message
from tests.llm_server import LoopbackServer, Reply

Answer = Callable[[dict[str, Any]], Reply]


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")


class BatchServer(LoopbackServer):
    """`with BatchServer(answer) as server:` → `server.url` (`.../v1`); `server.created` counts batches."""

    def __init__(self, answer: Answer, hold: bool = True, lose_created: int = 0) -> None:
        self.answer = answer
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.requests: dict[str, list[dict[str, Any]]] = {}  # Anthropic batch id -> its requests
        self.created = 0          # batches created, both APIs
        self.uploads = 0
        self.direct = 0           # plain chat completions answered
        self.lose_created = lose_created  # creates whose answer is dropped (the connection closes)
        self._held = hold
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        super().__init__()

    def release(self) -> None:
        """Let every batch finish on its next retrieve."""
        self._held = False

    # --- OpenAI ---------------------------------------------------------------------------------

    def _file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file_id = f"file-{next(self._ids):06d}"
        self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(content),
                               "created_at": int(time.time()), "filename": filename, "purpose": purpose,
                               "status": "processed", "status_details": None, "_content": content}
        return self.files[file_id]

    def upload(self, content_type: str, raw: bytes) -> dict[str, Any]:
        message = BytesParser(policy=email_policy).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        fields = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()}
        upload = fields["file"]
        with self._lock:
            self.uploads += 1
            return self._file(upload.get_payload(decode=True), upload.get_filename() or "input",
                              fields["purpose"].get_content().strip())

    def create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("input_file_id") not in self.files:
            raise KeyError("input_file_id")
        with self._lock:
            self.created += 1
            batch_id = f"batch_{next(self._ids):06d}"
            now = int(time.time())
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                "input_file_id": body["input_file_id"], "completion_window": body["completion_window"],
                "status": "validating", "output_file_id": None, "error_file_id": None, "created_at": now,
                "in_progress_at": None, "expires_at": now + 86_400, "finalizing_at": None,
                "completed_at": None, "failed_at": None, "expired_at": None, "cancelling_at": None,
                "cancelled_at": None, "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "metadata": body.get("metadata")}
            return self.batches[batch_id]

    def retrieve_batch(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self.batches[batch_id]
            if batch["status"] == "validating":
                lines = self.files[batch["input_file_id"]]["_content"].splitlines()
                batch.update(status="in_progress", in_progress_at=int(time.time()),
                             request_counts={"total": len(lines), "completed": 0, "failed": 0})
            elif batch["status"] == "in_progress" and not self._held:
                self._finish(batch)
            return batch

    def _finish(self, batch: dict[str, Any]) -> None:
        out = []
        for n, line in enumerate(self.files[batch["input_file_id"]]["_content"].splitlines()):
            request = json.loads(line)
            reply = self.answer(request["body"])
            response = {"status_code": reply.status, "request_id": f"req_{n}", "body": reply.body}
            out.append({"id": f"batch_req_{n}", "custom_id": request["custom_id"], "response": response,
                        "error": None})
        content = b"".join(json.dumps(row).encode() + b"\n" for row in out)
        output = self._file(content, f"{batch['id']}_output.jsonl", "batch_output")
        now = int(time.time())
        batch.update(status="completed", output_file_id=output["id"], finalizing_at=now, completed_at=now,
                     request_counts={"total": len(out), "completed": len(out), "failed": 0})

    # --- Anthropic --------------------------------------------------------------------------------

    def create_message_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.created += 1
            batch_id = f"msgbatch_{next(self._ids):06d}"
            now = time.time()
            self.requests[batch_id] = body["requests"]
            self.batches[batch_id] = {
                "id": batch_id, "type": "message_batch", "processing_status": "in_progress",
                "request_counts": {"processing": len(body["requests"]), "succeeded": 0, "errored": 0,
                                   "canceled": 0, "expired": 0},
                "ended_at": None, "created_at": _iso(now), "expires_at": _iso(now + 86_400),
                "archived_at": None, "cancel_initiated_at": None, "results_url": None}
            return self.batches[batch_id]

    def retrieve_message_batch(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self.batches[batch_id]
            if batch["processing_status"] == "in_progress" and not self._held:
                count = len(self.requests[batch_id])
                batch.update(processing_status="ended", ended_at=_iso(time.time()),
                             results_url=f"{self.url[:-3]}/v1/messages/batches/{batch_id}/results",
                             request_counts={"processing": 0, "succeeded": count, "errored": 0, "canceled": 0,
                                             "expired": 0})
            return batch

    def message_batch_results(self, batch_id: str) -> bytes:
        rows = [{"custom_id": request["custom_id"],
                 "result": {"type": "succeeded", "message": self.message(request["params"])}}
                for request in self.requests[batch_id]]
        return b"".join(json.dumps(row).encode() + b"\n" for row in rows)

    def message(self, params: dict[str, Any]) -> dict[str, Any]:
        """The scripted answer to an Anthropic Messages request, as an Anthropic message."""
        reply = self.answer(params).body or {}
        usage = reply.get("usage") or {}
        return anthropic_message(reply, {"input_tokens": usage.get("prompt_tokens", 10),
                                         "output_tokens": usage.get("completion_tokens", 5),
                                         "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0})

    # --- HTTP -------------------------------------------------------------------------------------

    def get(self, path: str) -> tuple[int, bytes, str]:
        parts = path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["v1", "files"] and parts[-1] == "content":
            return 200, self.files[parts[2]]["_content"], "application/octet-stream"
        if parts[:2] == ["v1", "files"]:
            return _json(_public(self.files[parts[2]]))
        if parts[:3] == ["v1", "messages", "batches"] and parts[-1] == "results":
            return 200, self.message_batch_results(parts[3]), "application/binary"
        if parts[:3] == ["v1", "messages", "batches"]:
            return _json(self.retrieve_message_batch(parts[3]))
        if parts == ["v1", "batches"]:
            listed = sorted((b for b in self.batches.values() if b.get("object") == "batch"),
                            key=lambda b: b["created_at"], reverse=True)
            return _json({"object": "list", "data": listed, "has_more": False,
                          "first_id": listed[0]["id"] if listed else None,
                          "last_id": listed[-1]["id"] if listed else None})
        if parts[:2] == ["v1", "batches"]:
            return _json(self.retrieve_batch(parts[2]))
        raise KeyError(path)

    def post(self, path: str, content_type: str, raw: bytes) -> tuple[int, bytes, str]:
        path = path.split("?")[0].rstrip("/")
        if path == "/v1/files":
            return _json(_public(self.upload(content_type, raw)))
        body = json.loads(raw or b"{}")
        if path == "/v1/batches":
            created = self.create_batch(body)
            with self._lock:
                if self.lose_created:
                    self.lose_created -= 1
                    raise ConnectionAbortedError("the answer to this create is lost")
            return _json(created)
        if path == "/v1/messages/batches":
            return _json(self.create_message_batch(body))
        with self._lock:
            self.direct += 1
        if path == "/v1/messages":
            return _json(self.message(body))
        reply = self.answer(body)
        return _json(reply.body or {}, reply.status)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                try:
                    self._send(*server.get(self.path))
                except (KeyError, IndexError):
                    self._send(*_json({"error": {"message": f"no such object: {self.path}"}}, 404))

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    self._send(*server.post(self.path, self.headers.get("Content-Type", ""), raw))
                except (KeyError, ValueError) as error:
                    self._send(*_json({"error": {"message": f"bad request: {error}"}}, 400))
                except ConnectionAbortedError:
                    self.close_connection = True  # no answer at all: the client sees the connection drop

            def _send(self, status: int, payload: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


def _json(body: dict[str, Any], status: int = 200) -> tuple[int, bytes, str]:
    return status, json.dumps(body).encode(), "application/json"


def _public(file: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in file.items() if not k.startswith("_")}
