"""The run's pseudonymisation settings (teachers/pseudonyms.py), made before ingestion: the user names
of the home paths the sessions record, so a name is replaced as a bare word too, the same way in every
file and worker process. And the run's own files (report.json, run.json) pseudonymised like the states.
"""

from __future__ import annotations

import getpass
import gzip
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teachers.pseudonyms import Pseudonyms, bare_names, home_names, pseudonymise_found, shared_pseudonyms

HEAD_BYTES = 32 << 10   # a session's first records name its cwd (and so its user) in every line

# Fields of run.json that replay.ablate / eval / verify open again: kept as given (a cache or a tokenizer
# path of the user's choosing; run.json is the run's own control file, never pushed).
OPERATIONAL = frozenset({"cache", "tokenizer", "preflight_tokenizer"})


def run_pseudonyms(files: list[Path], key: bytes, secrets: bool) -> Pseudonyms:
    """The settings of a run over `files`: the user names of the home paths in each file's first 32 kB
    (the recorded cwd), and this machine's user (whose sessions they usually are)."""
    return _settings(head_names(files), key, secrets)


def start_run_pseudonyms(files: list[Path], key: bytes, secrets: bool) -> Callable[[], Pseudonyms]:
    """`run_pseudonyms`, its files' heads read in a forked process while this one goes on (the run
    compiles its rules meanwhile: the heads were a serial tenth of a second before any file was read,
    on a corpus of 2,054 files, issue #55); call the result for the settings. Where forking is not safe
    (another thread runs, not Linux) or the child fails, the heads are read here."""
    if sys.platform != "linux" or threading.active_count() != 1:
        settings = run_pseudonyms(files, key, secrets)
        return lambda: settings
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: the names, then out at once (no atexit, no buffers of the parent's)
        status = 1
        try:
            os.close(read_end)
            with os.fdopen(write_end, "wb") as out:
                out.write(b"\0".join(name.encode("utf-8", "surrogatepass") for name in head_names(files)))
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)

    def settings() -> Pseudonyms:
        with os.fdopen(read_end, "rb") as handle:
            data = handle.read()
        _, status = os.waitpid(pid, 0)
        if status != 0:   # (it could not finish: read them here)
            return run_pseudonyms(files, key, secrets)
        return _settings({n.decode("utf-8", "surrogatepass") for n in data.split(b"\0") if n}, key, secrets)

    return settings


def head_names(files: list[Path]) -> set[str]:
    """The user names of the home paths in the first 32 kB of each of `files`."""
    names: set[str] = set()
    for path in files:
        names |= home_names(_head(path), names)   # a known name is not looked at again (its every line)
    return names


def _settings(names: set[str], key: bytes, secrets: bool) -> Pseudonyms:
    names = set(names)
    for name in (_local_user(), Path.home().name):
        if name:
            names.add(name)
    # The one object of these settings in this process, its hints' scanner made: worker processes
    # forked from it find both made (one object per settings: Pseudonyms.__reduce__).
    settings = shared_pseudonyms(key, bare_names(names), secrets)   # (the names it keeps: its key there)
    settings.prepare()
    return settings


def _head(path: Path) -> str:
    # Only a regular file: opening a FIFO blocks until a writer comes (the readers count it as a problem).
    if not path.is_file():
        return ""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as handle:
            data = handle.read(HEAD_BYTES)
    except (OSError, EOFError):
        return ""   # the readers count it
    if len(data) == HEAD_BYTES:
        data = data[:data.rfind(b"\n") + 1]   # a name cut at the end would be a wrong name
    return data.decode("utf-8", "replace")


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def pseudonymise_json(value: Any, settings: Pseudonyms | None, keep: frozenset[str] = frozenset(),
                      counts: dict[str, int] | None = None) -> Any:
    """A JSON-like value with every string pseudonymised (`keep`: keys left as they are).

    >>> pseudonymise_json({"file": "/home/bo/s.jsonl", "n": 1, "cache": "/home/bo/c"}, Pseudonyms(b"k"),
    ...                   keep=frozenset({"cache"}))
    {'file': '/home/user-fd2b8e/s.jsonl', 'n': 1, 'cache': '/home/bo/c'}
    """
    if settings is None:
        return value
    if isinstance(value, str):
        text, found = pseudonymise_found(value, settings)
        if counts is not None:
            for kind, _ in found:
                counts[kind] = counts.get(kind, 0) + 1
        return text
    if isinstance(value, dict):
        return {k: v if k in keep else pseudonymise_json(v, settings, keep, counts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [pseudonymise_json(v, settings, keep, counts) for v in value]
    return value
