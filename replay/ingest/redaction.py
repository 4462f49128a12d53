"""The key of the redaction placeholders' tags, shared by ingestion and the teacher pool."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def redaction_key() -> bytes:
    """The key of the placeholders' tags: `$REPLAY_REDACT_KEY`, else a random key kept in the user cache
    dir (created once, mode 600). Stable, so a re-run redacts to the same text and hits the cache."""
    if os.environ.get("REPLAY_REDACT_KEY"):
        return os.environ["REPLAY_REDACT_KEY"].encode()
    import platformdirs

    path = Path(platformdirs.user_cache_dir("teacher-replay")) / "redact.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written whole under a temporary name, then linked in place: a run that starts while another
        # creates the key reads all of it or none (created in place, it could read it empty).
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".redact.key.")   # mode 600
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(os.urandom(32).hex())
            os.link(tmp, path)
        except FileExistsError:  # another run made it first
            pass
        finally:
            os.unlink(tmp)
    return path.read_text().strip().encode()
