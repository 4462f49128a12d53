"""Helpers for tests that drive `replay.run` as a user does: in-process `main`, or a child process."""

from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from tests.llm_server import Reply
from tests.teacher_script import request_key, scripted

ROOT = Path(__file__).resolve().parents[1]


def pool(url: str, *names: str) -> str:
    return ",".join(f"{n}=openai/{n}@{url}" for n in names)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` → sha256 of its bytes; replay.run's own hidden folders (a run in
    progress or killed, a failed run's files kept for the user to read) are not OUT's outputs."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.relative_to(folder).parts[0].startswith(".replay-")}


def stored_keys(cache: Path) -> set[str]:
    """Cache keys holding an answer (read as another process would)."""
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=30) as db:
            return {key for (key,) in db.execute("SELECT key FROM responses WHERE error IS NULL")}
    except sqlite3.OperationalError:  # not created yet, or its tables not yet
        return set()


@contextmanager
def sigint_ignored() -> Iterator[None]:
    """Children started inside inherit SIGINT ignored, as a background job of a non-interactive shell
    does (`cmd &` in a script, CI runners)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def spawn(*args: str, ignoring_sigint: bool = False) -> subprocess.Popen[bytes]:
    """`python -m replay.run ARGS` from the checkout, output captured (`ignoring_sigint`: started
    inside `sigint_ignored`)."""
    with sigint_ignored() if ignoring_sigint else nullcontext():
        return subprocess.Popen([sys.executable, "-m", "replay.run", *args], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


class Held:
    """A responder that holds every request until the test lets them go (`gate`); `asked` is set by
    the first."""

    def __init__(self, respond: Callable[[dict[str, Any]], Reply]) -> None:
        self.respond = respond
        self.asked, self.gate = threading.Event(), threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.asked.set()
        self.gate.wait(120)
        return self.respond(body)


def sigint_when(args: list[str], when: Callable[[bytes], bool], what: str) -> tuple[int, str]:
    """`python ARGS` from the checkout, started ignoring SIGINT (`sigint_ignored`) and sent SIGINT once
    `when(stderr so far)` holds: (exit code, stderr). A run that ends first, or goes on after SIGINT, fails
    the test (it is killed)."""
    with sigint_ignored():
        process = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
    err = bytearray()   # read as it comes: a condition may wait for a progress bar
    reader = threading.Thread(target=lambda: [err.extend(chunk) for chunk in iter(
        lambda: process.stderr.read1(1 << 16), b"")], daemon=True)
    reader.start()
    try:
        wait_until(lambda: when(bytes(err)) or process.poll() is not None, what)
        assert process.poll() is None, f"ended before {what}: {err.decode()}"
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{' '.join(args[:2])} went on after SIGINT") from None
    finally:
        process.kill()
        reader.join(10)
    return process.returncode, err.decode()


def sigint_while_held(args: list[str], held: Held) -> tuple[int, str]:
    """`sigint_when` the run's request is held in `held`; the request is let go after."""
    try:
        return sigint_when(args, lambda _: held.asked.is_set(), "a request held")
    finally:
        held.gate.set()


def wait_until(condition: Callable[[], bool], what: str, limit: float = 300.0) -> None:
    """Poll `condition` (no timing asserted: `limit` only ends a test that would otherwise hang)."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


class Log:
    """A responder wrapper recording, per request, its key, when it arrived and when it was answered."""

    def __init__(self, respond: Callable[[dict[str, Any]], Reply] = scripted, delay: float = 0.0) -> None:
        self.respond, self.delay = respond, delay
        self.lock = threading.Lock()
        self.arrived: list[tuple[float, str]] = []
        self.answered: list[tuple[float, str]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        key = request_key(body)
        with self.lock:
            self.arrived.append((time.time(), key))
        time.sleep(self.delay)
        reply = self.respond(body)
        with self.lock:  # the answer is written right after this returns
            self.answered.append((time.time(), key))
        return reply

    def keys(self) -> list[str]:
        with self.lock:
            return [key for _, key in self.arrived]

    def clear(self) -> None:
        with self.lock:
            self.arrived.clear()
            self.answered.clear()


def tagged(body: dict[str, Any], agreeing: tuple[str, ...] = ("ta", "tb")) -> Reply:
    """The scripted answer (teachers ta and tb agree: pairs get made), its id naming the request, so
    a cache row says which request it answers."""
    reply = scripted(body, agreeing)
    reply.body["id"] = f"chatcmpl-{request_key(body)}"
    return reply


def answered(cache: Path) -> set[str]:
    """Request keys (tests.teacher_script.request_key) whose answers the cache holds."""
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=30) as db:
            rows = db.execute("SELECT response_json FROM responses WHERE error IS NULL").fetchall()
    except sqlite3.OperationalError:
        return set()
    return {json.loads(text)["id"].removeprefix("chatcmpl-") for (text,) in rows}
