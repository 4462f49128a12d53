"""Which states are read at all (issue #50): `--project` / `--exclude-project` globs and the `--since` /
`--until` bounds. A state left out is never written or sent; it is counted by the first filter that
left it out (`IngestStats.filtered`, report.json `filtered`).

A state's projects are the folders between its `--source` root and its file (Claude Code's encoded
folder, `-Users-alex-work-client`) and the cwd its records give (`/Users/alex/work/client`, and its last
part `client`): a glob matching any of them matches the state, so a folder name and a recorded cwd that
disagree are both heard (an `--exclude-project` glob leaves out a state either names). Dates bound each
turn's own timestamp: a session that straddles `--since` keeps its later turns, whose history still
holds the earlier ones as far as the prompt budgets keep them. A state without a timestamp is left out
when a bound is set.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path, PurePath
from typing import Any

from pydantic import Field

from ingestion.schema import StrictModel

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
FILTERS = ("project", "exclude_project", "since", "until")


class Scope(StrictModel):
    projects: list[str] = Field(default_factory=list)          # --project: keep states any of these match
    exclude_projects: list[str] = Field(default_factory=list)  # --exclude-project: leave these out
    since: datetime | None = None                              # turns at or after this instant
    until: datetime | None = None                              # turns before this instant
    roots: list[Path] = Field(default_factory=list)            # the --source paths

    def active(self) -> bool:
        return bool(self.projects or self.exclude_projects or self.since or self.until)


def parse_when(text: str, now: datetime, end: bool = False) -> datetime:
    """A `--since` / `--until` value as an aware instant: a duration back from `now` (`7d`, `12h`, `2w`,
    `30m`), a date (`--since`: its start; `--until`: its end, so the day is included) or an ISO time;
    a date or time without a zone is local time (`now`'s zone). ValueError says what it takes.

    >>> now = datetime(2025, 7, 10, 12, 0, tzinfo=UTC)
    >>> parse_when("7d", now).isoformat(), parse_when("2025-07-01", now, end=True).isoformat()
    ('2025-07-03T12:00:00+00:00', '2025-07-02T00:00:00+00:00')
    >>> parse_when("2025-07-01T08:30:00Z", now).isoformat()
    '2025-07-01T08:30:00+00:00'
    """
    if match := _DURATION.match(text):
        return now - timedelta(seconds=float(match[1]) * _UNITS[match[2].lower()])
    value = text.strip()
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{text!r} is neither a date (2025-07-01), an ISO time (2025-07-01T08:30) nor a "
                         f"duration back from now (7d, 12h, 2w, 30m)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=now.tzinfo)
    if end and _DATE.match(value):
        when += timedelta(days=1)
    return when


def project_folders(path: Path, roots: list[Path]) -> tuple[str, ...]:
    """The folders between the `--source` root holding `path` and `path` (the root's own name when
    `path` is right in it, or is the root).

    >>> project_folders(Path("/p/-Users-a-x/s.jsonl"), [Path("/p")])
    ('-Users-a-x',)
    >>> project_folders(Path("/p/-Users-a-x/s.jsonl"), [Path("/p/-Users-a-x")])
    ('-Users-a-x',)
    """
    for root in roots:
        try:
            parts = path.relative_to(root).parts[:-1]
        except ValueError:
            continue
        return parts or ((root if root != path else path.parent).name,)
    return (path.parent.name,)


def _names(folders: tuple[str, ...], cwd: Any) -> list[str]:
    names = list(folders)
    if isinstance(cwd, str) and cwd:
        names += [cwd, PurePath(cwd.rstrip("/\\")).name or cwd]
    return names


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def left_out_by(scope: Scope, folders: tuple[str, ...], metadata: dict[str, Any],
                matched: dict[str, int] | None = None) -> str | None:
    """The first filter that leaves a state out (`project`, `exclude_project`, `since`, `until`, or
    `no_timestamp` when a bound is set and the state has none), None when it is kept. `matched` counts,
    per `project:GLOB` / `exclude_project:GLOB`, the states each glob matched (to tell a glob that
    matches nothing).

    >>> s = Scope(projects=["*client*"], since=datetime(2025, 7, 1, tzinfo=UTC))
    >>> left_out_by(s, ("-Users-a-x",), {"cwd": "/Users/a/client-x", "timestamp": "2025-07-02T00:00:00Z"})
    >>> left_out_by(s, ("-Users-a-client-x",), {"cwd": "/Users/a/x", "timestamp": "2025-06-30T00:00:00Z"})
    'since'
    >>> left_out_by(s, ("-Users-a-x",), {"cwd": "/Users/a/x"})
    'project'
    """
    names = _names(folders, metadata.get("cwd")) if scope.projects or scope.exclude_projects else []
    why = None
    for flag, globs in (("project", scope.projects), ("exclude_project", scope.exclude_projects)):
        hits = [glob for glob in globs if any(fnmatchcase(name, glob) for name in names)]
        if matched is not None:
            for glob in hits:
                matched[f"{flag}:{glob}"] = matched.get(f"{flag}:{glob}", 0) + 1
        if why is None and globs and (not hits if flag == "project" else hits):
            why = flag
    if why is not None or (scope.since is None and scope.until is None):
        return why
    when = _instant(metadata.get("timestamp"))
    if when is None:
        return "no_timestamp"
    if scope.since is not None and when < scope.since:
        return "since"
    if scope.until is not None and when >= scope.until:
        return "until"
    return None


def scope_problems(scope: Scope, matched: dict[str, int], filtered: dict[str, int], kept: int
                   ) -> tuple[list[str], list[str]]:
    """(errors, warnings) once every file is read: a `--project` glob set of which none matched is an
    error (nothing would be sent); a glob matching nothing beside others that do, an `--exclude-project`
    glob matching nothing (a standing exclusion may have nothing to exclude this time, or be a typo:
    said), and states without timestamps under a date bound are warnings.

    >>> scope_problems(Scope(projects=["a*"], exclude_projects=["z"]), {}, {"project": 3}, 0)[0]
    ["--project 'a*' matches no project of the 3 states read"]
    """
    errors: list[str] = []
    warnings: list[str] = []
    read = kept + sum(filtered.values())
    unmatched = [g for g in scope.projects if not matched.get(f"project:{g}")]
    if scope.projects and len(unmatched) == len(scope.projects):
        errors.append(f"--project {' '.join(map(repr, unmatched))} matches no project of the {read} states "
                      f"read")
    else:
        warnings += [f"--project {g!r} matches no project (the others do)" for g in unmatched]
    warnings += [f"--exclude-project {g!r} matches no project: nothing was left out by it (a typo?)"
                 for g in scope.exclude_projects if not matched.get(f"exclude_project:{g}")]
    if read and not kept and not errors:
        warnings.append(f"the filters left out every one of the {read} states read")
    if filtered.get("no_timestamp"):
        warnings.append(f"{filtered['no_timestamp']} states have no timestamp and were left out by "
                        f"--since/--until")
    return errors, warnings
