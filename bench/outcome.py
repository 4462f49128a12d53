"""What outcomes and `--select` add to ingestion (#25), in CPU seconds (process_time: the machine is shared).

    python bench/outcome.py [--copies 10] [--repeat 5]

Over the shared fixtures read --copies times (`--include-subagents`): the whole ingestion
(`iter_states`, outcomes and recoveries included), then the outcome part alone (`SessionOutcomes.of` on
every turn of the already loaded sessions), then `choose` for the four filters on the states' rows.
Medians of --repeat.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from ingestion.claude_code.outcome import SessionOutcomes  # noqa: E402
from ingestion.claude_code.session import load_session  # noqa: E402
from ingestion.options import IngestOptions  # noqa: E402
from ingestion.sources import find_files, iter_states  # noqa: E402
from ingestion.stats import IngestStats  # noqa: E402
from replay.select.filters import choose, parse_selection, row_of  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "claude_code" / "projects"


def cpu(work) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    options = IngestOptions(include_subagents=True)
    files = find_files(FIXTURES)
    rows = []

    def ingest() -> None:
        rows.clear()
        for copy in range(args.copies):   # each copy its own states and traces, as distinct sessions
            rows.extend(r._replace(state_id=f"{copy}:{r.state_id}", trace_id=f"{copy}:{r.trace_id}")
                        for r in map(row_of, iter_states(FIXTURES, options, IngestStats(), files=files)))

    sessions = [load_session(path, IngestStats()) for path in files]

    def outcomes() -> None:
        for _ in range(args.copies):
            for session in sessions:
                reader = SessionOutcomes(session)
                for group in session.groups.values():
                    reader.of(group)

    filters = [["outcome=failed"], ["tool=Edit,Bash"], ["after-failure=2"], ["per-trace=20"]]
    whole = statistics.median(cpu(ingest) for _ in range(args.repeat))
    part = statistics.median(cpu(outcomes) for _ in range(args.repeat))
    print(f"{len(rows)} states ({args.copies} x the fixtures, subagents included)")
    print(f"  ingestion, outcomes included : {whole:7.3f} s CPU")
    print(f"  outcomes alone               : {part:7.3f} s CPU  ({part / whole:.1%} of ingestion)")
    for values in filters:
        selection = parse_selection(values)
        took = statistics.median(cpu(lambda s=selection: choose(rows, s)) for _ in range(args.repeat))
        kept = len(choose(rows, selection))
        print(f"  choose {values[0]:<20} : {took * 1000:7.2f} ms CPU  {kept} of {len(rows)} kept")


if __name__ == "__main__":
    main()
