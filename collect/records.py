"""Writing rollout traces: one JSONL file per rollout, flushed per record.

The record models are defined by the reader, in ingestion/rollout_format.py (documented in
collect/ROLLOUT_FORMAT.md); this module only appends them to files.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import IO

from pydantic import BaseModel

from ingestion.rollout_format import dump_record


class RolloutWriter:
    """Appends records to one rollout file, flushed per record so a crash keeps every finished turn."""

    def __init__(self, path: Path, mode: str = "wb") -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = path.open(mode)

    def write(self, record: BaseModel) -> None:
        with self._lock:
            if self._file is None:
                return                     # closed by an interrupt; the record has nowhere to go
            self._file.write(dump_record(record))
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> RolloutWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
