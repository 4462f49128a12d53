"""Find what a --source path holds and read it into TraceStates, one file at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ingestion.claude_code.reader import session_states
from ingestion.options import IngestOptions
from ingestion.schema import SourceError, TraceState
from ingestion.stats import IngestStats

ROLLOUT_SUFFIX = ".rollout.jsonl"


def find_files(source: Path) -> list[Path]:
    """Session (and rollout) files under `source`: one file, a project folder or the projects root.

    Sorted so a run is reproducible and the first copy of a resumed message wins.
    """
    if not source.exists():
        raise SourceError(f"--source {source}: no such file or directory")
    if source.is_file():
        if source.suffix != ".jsonl":
            raise SourceError(f"--source {source}: not a .jsonl session file")
        return [source]
    files = sorted(p for p in source.rglob("*.jsonl") if p.is_file())
    if not files:
        raise SourceError(f"--source {source}: no session files (*.jsonl) found under it")
    return files


def iter_states(source: Path, options: IngestOptions, stats: IngestStats,
                files: list[Path] | None = None,
                on_file: Callable[[Path], None] | None = None) -> Iterator[TraceState]:
    """Every state under `source`, streaming one file at a time; `on_file` is told of each file read."""
    seen_messages: set[str] = set()
    emitted = 0
    for path in files if files is not None else find_files(source):
        stats.files += 1
        if path.stat().st_size == 0:
            stats.problem(str(path), None, "empty_file", action="file")
        else:
            for state in _file_states(path, options, stats, seen_messages):
                yield state
                emitted += 1
                if options.max_states is not None and emitted >= options.max_states:
                    return
        if on_file is not None:
            on_file(path)


def _file_states(path: Path, options: IngestOptions, stats: IngestStats,
                 seen_messages: set[str]) -> Iterator[TraceState]:
    from ingestion.claude_rollouts import iter_claude_rollout_states, rollout_folder

    if rollout_folder(path) is not None:   # collect.run --agent claude-code: session + proxy records
        return iter_claude_rollout_states(path, options, stats, seen_messages)
    if path.name.endswith(ROLLOUT_SUFFIX):
        from ingestion.budget import fit_states
        from ingestion.messages import fix_messages
        from ingestion.rollouts import iter_rollout_states

        # A rollout's turns are its recorded requests, whole: the message fixes chat templates need,
        # and budgets only for a training length (the student saw them whole).
        states = (s.model_copy(update={"messages": fix_messages(s.messages)})
                  for s in iter_rollout_states(path, stats))
        return fit_states(states, options, stats) if options.max_length else states
    return session_states(path, options, stats, seen_messages)
