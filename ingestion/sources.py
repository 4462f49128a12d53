"""Find what --source holds and read it into TraceStates, one file at a time.

`--source` is one path or several (any mix of roots and files: `~/.claude/projects`, `~/.codex/sessions`,
`~/.gemini/tmp`, one session file). Each file's reader is chosen by its content (ingestion/detect.py);
a file no reader knows is a counted skip (`skipped_files["unknown_format"]`).

What cannot be read (a folder without permission, a file without read permission, a FIFO, a broken
link) is a counted skip with its reason in the report, never an error that stops the run.
"""

from __future__ import annotations

import gc
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ingestion.claude_code.agents import AGENT_PREFIX
from ingestion.claude_code.reader import session_states
from ingestion.ids import Seen
from ingestion.options import IngestOptions
from ingestion.outcome import kind_of, link_recoveries
from ingestion.schema import SourceError, TraceState
from ingestion.scope import left_out_by, project_folders
from ingestion.stats import IngestStats

ROLLOUT_SUFFIX = ".rollout.jsonl"
TRAJECTORY_FORMATS = ("mini_swe_agent", "swe_agent", "openhands", "atif", "trajectory_dataset")
AGL_FORMATS = ("agl_spans", "agl_gateway")   # agent-lightning (ingestion/agent_lightning/)
SESSION_SUFFIXES = (".jsonl", ".jsonl.gz")
# Whole-file JSON logs (Gemini CLI's session-*.json). Claude Code's side files are never read as traces.
JSON_SUFFIX = ".json"
# Trajectories and trajectory datasets (ingestion/trajectories/): SWE-agent's *.traj, parquet rows.
TRAJECTORY_SUFFIXES = (".traj", ".parquet")
SIDE_SUFFIXES = (".meta.json",)


def is_session_name(name: str) -> bool:
    """A name a session (or rollout) file may have: `*.jsonl`, or gzipped `*.jsonl.gz`.

    >>> is_session_name("s.jsonl"), is_session_name("s.jsonl.gz"), is_session_name("s.meta.json")
    (True, True, False)
    """
    return name.endswith(SESSION_SUFFIXES)


def is_log_name(name: str) -> bool:
    """A name any agent's log may have: a session name, or `*.json` (not a Claude Code side file).

    >>> is_log_name("session-1.json"), is_log_name("agent-a.meta.json"), is_log_name("s.jsonl")
    (True, False, True)
    """
    return is_session_name(name) or name.endswith(TRAJECTORY_SUFFIXES) or (
        name.endswith(JSON_SUFFIX) and not name.endswith(SIDE_SUFFIXES))


def split_sources(values: Sequence[str]) -> list[Path]:
    """The paths of repeated and/or comma-separated `--source` values; a value that exists as it is
    (a name with a comma in it) is one path.

    >>> split_sources(["a,b", "c"])
    [PosixPath('a'), PosixPath('b'), PosixPath('c')]
    """
    paths: list[Path] = []
    for value in values:
        whole = os.path.expanduser(value)
        if "," not in value or os.path.lexists(whole):
            paths.append(Path(whole))
        else:
            paths.extend(Path(os.path.expanduser(part)) for part in value.split(",") if part)
    return paths


def find_files(source: Path | Sequence[Path], stats: IngestStats | None = None) -> list[Path]:
    """Every log file under `source` (one path or several), in order, each file once."""
    stats = stats if stats is not None else IngestStats()
    roots = [source] if isinstance(source, str | os.PathLike) else list(source)
    files: list[Path] = []
    seen: set[tuple[int, int] | str] = set()
    for root in roots:
        for path in _root_files(Path(root), stats):
            key = _identity(path)
            if key not in seen:
                seen.add(key)
                files.append(path)
    return files


def _identity(path: Path) -> tuple[int, int] | str:
    # The file a path leads to, links followed: one stat, where os.path.realpath takes one per folder
    # of the path (a third of a second on 2,907 files in deep folders). A path that cannot be
    # stat'ed (a broken link) stays itself: reading it counts why.
    try:
        info = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return info.st_dev, info.st_ino


def _root_files(source: Path, stats: IngestStats) -> list[Path]:
    """Session (and rollout) files under `source`: one file, a project folder or the projects root.

    Sorted so a run is reproducible and the first copy of a resumed message wins; main sessions come
    before subagent transcripts, so a turn a subagent file repeats stays its parent's. Folders that
    cannot be listed are counted in `stats` (`skipped_files["unreadable_folder"]`). A live
    agent-lightning Gateway (`agl+http://HOST:PORT`) is fetched into an export file first, and that is read.
    """
    from ingestion.agent_lightning.export import live_export, live_url

    url = live_url(source)
    if url is not None:
        return [live_export(url)]
    try:
        mode = os.stat(source).st_mode
    except FileNotFoundError:
        raise SourceError(f"--source {source}: no such file or directory") from None
    except OSError as error:
        raise SourceError(f"--source {source}: {error.strerror or error}") from None
    if not stat.S_ISDIR(mode):
        if not is_log_name(source.name):
            raise SourceError(f"--source {source}: not a .jsonl, .jsonl.gz or .json session file")
        return [source]
    try:
        os.scandir(source).close()
    except OSError as error:
        raise SourceError(f"--source {source}: {error.strerror or error}") from None
    skipped = stats.skipped_files["unreadable_folder"]
    files = sorted(_walk(source, stats), key=lambda p: (p.name.startswith(AGENT_PREFIX), str(p)))
    if not files and stats.skipped_files["unreadable_folder"] == skipped:
        raise SourceError(f"--source {source}: no session or trajectory files (*.jsonl, *.jsonl.gz, *.json, "
                          "*.traj, *.parquet) found under it")
    return files


def _walk(root: Path, stats: IngestStats) -> Iterator[Path]:
    """Every session-named entry under `root`, following links to folders once each."""
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            info = folder.stat()
            entries = list(os.scandir(folder))
        except OSError as error:
            stats.problem(str(folder), None, "unreadable_folder", action="file",
                          detail=error.strerror or str(error))
            continue
        if (info.st_dev, info.st_ino) in seen:   # a link back up the tree
            continue
        seen.add((info.st_dev, info.st_ino))
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                stack.append(Path(entry.path))
            elif is_log_name(entry.name):
                yield Path(entry.path)


def unreadable(path: Path) -> tuple[str, str] | None:
    """Why `path` cannot be read as a session file (reason, the OS's words), or None. Never opens
    what is not a regular file: a FIFO would block the run.

    >>> unreadable(Path("/nonexistent/x.jsonl"))[0]
    'missing_file'
    """
    try:
        info = os.stat(path)
    except FileNotFoundError as error:     # a broken link, or removed while the run was going
        return "missing_file", error.strerror or str(error)
    except OSError as error:
        return "unreadable_file", error.strerror or str(error)
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode) \
            else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "not a file"
        return "not_a_regular_file", kind
    if info.st_size == 0:
        return "empty_file", ""
    try:
        open(path, "rb").close()
    except OSError as error:
        return "unreadable_file", error.strerror or str(error)
    return None


def iter_states(source: Path | Sequence[Path], options: IngestOptions, stats: IngestStats,
                files: list[Path] | None = None,
                on_file: Callable[[Path], None] | None = None) -> Iterator[TraceState]:
    """Every state under `source`, streaming one file at a time; `on_file` is told of each file read.
    A failed state names its recovery (ingestion/outcome.py), so states pass one behind the reading."""
    return link_recoveries(_iter_states(source, options, stats, files, on_file))


def _iter_states(source: Path, options: IngestOptions, stats: IngestStats, files: list[Path] | None,
                 on_file: Callable[[Path], None] | None) -> Iterator[TraceState]:
    seen = Seen()
    emitted = 0
    for path in files if files is not None else find_files(source, stats):
        with no_cyclic_gc():
            for state in read_file(path, options, stats, seen):
                yield state
                emitted += 1
                if options.max_states is not None and emitted >= options.max_states:
                    return
        if on_file is not None:
            on_file(path)


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic GC off while one file is read (and its states used): it would walk every live object
    of the file again and again while they pile up, and find no garbage (records, messages, states and
    their copies hold no cycles): 15% of a run on real sessions (issue #39). On again after the file,
    when it was on before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_file(path: Path, options: IngestOptions, stats: IngestStats, seen: Seen) -> Iterator[TraceState]:
    """The states of one file of a run, counted in `stats`; `seen` is what earlier files gave."""
    stats.files += 1
    why = unreadable(path)
    if why is not None:
        stats.problem(str(path), None, why[0], action="file", detail=why[1])
        return
    scope = options.scope if options.scope is not None and options.scope.active() else None
    folders = project_folders(path, scope.roots) if scope is not None else ()
    for state in _file_states(path, options, stats, seen):
        if scope is not None and (why := left_out_by(scope, folders, state.metadata, stats.scope_matched)):
            stats.states -= 1   # counted by its reader: a state left out is not one of the run's
            stats.filtered[why] += 1
            continue
        stats.count_format(state.source, states=1)
        stats.outcomes[kind_of(state.metadata)] += 1
        yield state


def _file_states(path: Path, options: IngestOptions, stats: IngestStats,
                 seen: Seen) -> Iterator[TraceState]:
    from ingestion.claude_rollouts import iter_claude_rollout_states, rollout_folder

    if rollout_folder(path) is not None:   # collect.run --agent claude-code: session + proxy records
        stats.count_format("swebench_rollout", files=1)
        return iter_claude_rollout_states(path, options, stats, seen)
    if path.name.endswith(ROLLOUT_SUFFIX):
        stats.count_format("swebench_rollout", files=1)
        from ingestion.rollouts import iter_rollout_states

        return _as_rollouts(iter_rollout_states(path, stats), options, stats)
    return _agent_states(path, options, stats, seen)


def _as_rollouts(states: Iterator[TraceState], options: IngestOptions,
                 stats: IngestStats) -> Iterator[TraceState]:
    """A rollout's turns are its recorded requests, whole: the message fixes chat templates need, and
    budgets only for a training length (the student saw them whole)."""
    from ingestion.budget import fit_states
    from ingestion.messages import fix_messages

    fixed = (s.model_copy(update={"messages": fix_messages(s.messages)}) for s in states)
    return fit_states(fixed, options, stats) if options.max_length else fixed


def _agent_states(path: Path, options: IngestOptions, stats: IngestStats,
                  seen: Seen) -> Iterator[TraceState]:
    from ingestion.claude_code.agents import is_side_file
    from ingestion.detect import UNKNOWN, sniff

    if is_side_file(path):   # a Workflow journal in a Claude Code session's folder: counted as before
        return session_states(path, options, stats, seen)
    found = sniff(path)
    if found == "hf_dataset_state":   # a saved dataset's state.json: its dataset_info.json reads the folder
        stats.skipped_files["dataset_side_file"] += 1
        return iter(())
    if found == "agl_seed_dataset":   # the seed example's dataset-<id>/: its stream_<id>.json holds more
        stats.problem(str(path), None, "agl_seed_dataset", action="file",
                      detail="the completions are token ids only; read from stream_<id>.json beside it")
        return iter(())
    if found == "hf_dataset_info":
        found = "trajectory_dataset"
    if found == UNKNOWN:
        stats.problem(str(path), None, "unknown_format", action="file",
                      detail="no reader knows its first records")
        return iter(())
    stats.count_format(found, files=1)
    if found == "codex":
        from ingestion.codex import codex_states

        return codex_states(path, options, stats, seen)
    if found == "gemini":
        from ingestion.gemini import gemini_states

        return gemini_states(path, options, stats, seen)
    if found == "copilot":
        from ingestion.copilot import copilot_states

        return copilot_states(path, options, stats, seen)
    if found in AGL_FORMATS:
        from ingestion.agent_lightning import agl_states

        # Like collect/'s rollouts: the recorded requests whole, budgets only for a training length.
        return _as_rollouts(agl_states(path, found, stats, seen), options, stats)
    if found in TRAJECTORY_FORMATS:
        from ingestion.trajectories import trajectory_states

        return trajectory_states(path, found, options, stats, seen)
    return session_states(path, options, stats, seen)
