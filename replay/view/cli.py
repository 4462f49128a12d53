"""The command line of `python -m replay.view OUT` (and `replay.run --view`): write OUT/view/."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ingestion.schema import ReplayError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m replay.view",
        description="Static HTML pages of a replay.run: overview, filterable list of states, one page per "
                    "state (context, the student's action, each teacher's proposal, chosen vs rejected). "
                    "No server, nothing fetched: open OUT/view/index.html from disk.")
    parser.add_argument("run", type=Path, metavar="OUT", help="the --out folder of a replay.run")
    parser.add_argument("--out", type=Path, default=None, help="where the pages go (default: OUT/view)")
    args = parser.parse_args(argv)
    from replay.view.build import build_view

    try:
        summary = build_view(args.run, args.out)
    except (ReplayError, OSError) as error:
        print(f"replay.view: error: {error}", file=sys.stderr)
        return 2
    print(f"{summary.folder / 'index.html'}: {summary.states} states, {summary.files} files, "
          f"largest {summary.largest_page} {summary.largest_bytes / 1e6:.2f} MB, {summary.seconds:.1f} s")
    return 0
