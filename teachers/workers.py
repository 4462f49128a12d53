"""Threads for the blocking half of the pool's work, so the event loop only schedules.

litellm builds a request on the thread that calls it (the OpenAI SDK walks every message of a prompt
to transform it: seconds of loop time per run on the fixtures' 100-400 kB prompts, measured), and
redaction, cache keys and SQLite reads are CPU or I/O of their own. An answer read on a stalled loop
waits there unstored: after kill -9 it would be paid for again. So all of it runs here.

The threads are daemons, unlike `concurrent.futures`' (joined at exit): Ctrl-C must not wait for an
HTTP read that may take `--timeout` seconds to end. Threads start on demand, up to `max_workers`.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")


class DaemonExecutor(Executor):
    """A thread pool of daemon threads.

    >>> DaemonExecutor(2).submit(sum, [1, 2]).result()
    3
    """

    def __init__(self, max_workers: int = 256, name: str = "replay-worker") -> None:
        self._max, self._name = max_workers, name
        self._queue: queue.SimpleQueue[tuple[Future, Callable[[], Any]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("executor is shut down")
            self._queue.put((future, functools.partial(fn, *args, **kwargs)))
            if self._idle == 0 and len(self._threads) < self._max:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"{self._name}-{len(self._threads)}")
                self._threads.append(thread)
                thread.start()
            else:
                self._idle -= 1  # a waiting thread takes it
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            for _ in self._threads:
                self._queue.put(None)
        if wait:
            for thread in self._threads:
                thread.join()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, call = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as error:  # handed to whoever awaits the future
                    future.set_exception(error)
            with self._lock:
                self._idle += 1


_EXECUTOR = DaemonExecutor()
async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` on a worker thread, awaited without blocking the event loop.

    >>> asyncio.run(blocking(sorted, [3, 1, 2]))
    [1, 2, 3]
    """
    return await asyncio.wrap_future(_EXECUTOR.submit(fn, *args, **kwargs))
