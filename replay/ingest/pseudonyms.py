"""The run's pseudonymisation settings (teachers/pseudonyms.py), made before ingestion: the user names
of the home paths the sessions record, so a name is replaced as a bare word too, the same way in every
file and worker process. And the run's own files (report.json, run.json) pseudonymised like the states.
"""

from __future__ import annotations

import getpass
import gzip
from pathlib import Path
from typing import Any

from teachers.pseudonyms import Pseudonyms, home_names, pseudonymise_found

HEAD_BYTES = 32 << 10   # a session's first records name its cwd (and so its user) in every line

# Fields of run.json that replay.ablate / eval / verify open again: kept as given (a cache or a tokenizer
# path of the user's choosing; run.json is the run's own control file, never pushed).
OPERATIONAL = frozenset({"cache", "tokenizer", "preflight_tokenizer"})


def run_pseudonyms(files: list[Path], key: bytes, secrets: bool) -> Pseudonyms:
    """The settings of a run over `files`: the user names of the home paths in each file's first 32 kB
    (the recorded cwd), and this machine's user (whose sessions they usually are)."""
    names: set[str] = set()
    for path in files:
        names |= home_names(_head(path), names)   # a known name is not looked at again (its every line)
    for name in (_local_user(), Path.home().name):
        if name:
            names.add(name)
    return Pseudonyms(key, tuple(sorted(names)), secrets)


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
