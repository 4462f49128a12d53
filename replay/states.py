"""`python -m replay.states OUT [ID ...]`: a run's TraceStates in full, one JSON object per line.

`OUT/states.jsonl` stores each state's history as index ranges into `OUT/traces.jsonl`
(ingestion/store.py); this prints what the reader rebuilds: every message, the tools, the action.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replay.states", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the --out folder of replay.run (or its states.jsonl)")
    parser.add_argument("ids", nargs="*", metavar="ID",
                        help="only these state ids or trace ids (default: every state)")
    parser.add_argument("--indent", action="store_true", help="pretty-print each state")
    args = parser.parse_args(argv)
    from ingestion.schema import ReplayError
    from ingestion.store import load_states

    wanted = set(args.ids)
    option = orjson.OPT_INDENT_2 if args.indent else 0
    try:
        for state in load_states(args.out):
            if not wanted or state.state_id in wanted or state.trace_id in wanted:
                sys.stdout.buffer.write(orjson.dumps(state.model_dump(mode="json"), option=option) + b"\n")
    except ReplayError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:     # `| head`
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
