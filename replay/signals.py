"""How the commands that ask models stop on a signal: SIGINT and SIGTERM both end in a KeyboardInterrupt
the command turns into one line and exit 130 / 143, after every `finally` ran."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupted(KeyboardInterrupt):
    """SIGTERM, raised as SIGINT's KeyboardInterrupt is, so every `finally` runs. A KeyboardInterrupt
    itself: asyncio lets only those (and SystemExit) out of the loop's callbacks, and logs and drops any
    other exception raised there — a SIGTERM that lands while the loop runs one would be lost, and the
    run would go on to the end."""


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt and SIGTERM `Interrupted` (main thread only), whatever the
    process inherited; both handlers as they were afterwards.

    SIGINT's handler is installed explicitly: a process a script starts in the background (`cmd &`
    without job control: CI runners, batch jobs) inherits SIGINT ignored, Python then installs no
    handler of its own, and a `kill -INT` was ignored while the run went on to the end and exited 0.
    It is Python's own `default_int_handler`, so `asyncio.run` still takes SIGINT over (it cancels the
    main task, and only when it finds that handler installed)."""
    def terminate(signum: int, frame: object) -> None:
        raise Interrupted()

    previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
                signal.SIGTERM: signal.signal(signal.SIGTERM, terminate)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:   # None: set outside Python (an embedding program), left as ours
                signal.signal(signum, handler)


@contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive inside the block wait until it is done (a save that must be whole),
    then act as usual.

    >>> import os, threading
    >>> go = threading.Event()   # a thread started before (torch's): a signal to the process may land there
    >>> sender = threading.Thread(target=lambda: go.wait() and os.kill(os.getpid(), signal.SIGINT))
    >>> sender.start()
    >>> try:
    ...     with stop_signals(), deferred():   # (a process may inherit SIGINT ignored)
    ...         go.set(); sender.join()
    ...         print("saved")
    ... except KeyboardInterrupt:
    ...     print("then interrupted")
    saved
    then interrupted
    """
    # Held by handlers, not by a signal mask: a mask holds a signal for this thread only, and the kernel
    # gives a process-wide signal to any thread that does not block it (torch's, started before).
    # Python runs handlers in the main thread, whichever thread the signal landed on.
    if threading.current_thread() is not threading.main_thread():
        yield   # (handlers can be set from the main thread only)
        return
    held: list[int] = []
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum, handler in previous.items():
        if handler is not None:   # None: set outside Python, left as it is
            signal.signal(signum, lambda number, frame: held.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:
                signal.signal(signum, handler)
    if held:
        signal.raise_signal(held[0])   # acts now as it would have (ignored, if it was)


def interruption(error: BaseException) -> BaseException | None:
    """The SIGINT / SIGTERM in `error`: itself, or one inside an exception group (a signal that lands
    while a task of the run's TaskGroup runs is raised in that task, and the group wraps it).

    >>> interruption(BaseExceptionGroup("run", [ValueError(), Interrupted()])).__class__.__name__
    'Interrupted'
    >>> interruption(ExceptionGroup("run", [ValueError()])) is None
    True
    """
    if isinstance(error, KeyboardInterrupt):    # Interrupted too
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            if (found := interruption(inner)) is not None:
                return found
    return None


def interrupted_exit(caught: BaseException, what: str) -> int | None:
    """The exit code of the signal in `caught` (130 SIGINT, 143 SIGTERM) once its one line, saying
    `what` the command leaves, is printed; None when `caught` holds no signal."""
    stop = interruption(caught)
    if stop is None:
        return None
    name, code = ("SIGTERM", 143) if isinstance(stop, Interrupted) else ("SIGINT", 130)
    print(f"interrupted ({name}): {what}", file=sys.stderr)
    return code


def kept(out: object) -> str:
    """What an interrupted command that writes `out` whole or not at all leaves."""
    return (f"every answer received is in the cache and {out} is as it was; run the same command again "
            "to go on")
