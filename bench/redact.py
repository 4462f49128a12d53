"""Redaction speed on a large prompt: `python -m bench.redact [--lines N] [--repeat R]`.

What `tests/test_teachers_redact.py` used to assert with a stopwatch (and failed on a busy machine):
how long `redact_text` takes on ~0.8 MB of ordinary code with one secret at the end, printed beside a
baseline that every scan must pay anyway (one compiled regex over every line), as a ratio.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # `python bench/redact.py`: this folder must not shadow the packages

from teachers.redact import _redact_cached, redact_text  # noqa: E402

LINE = "    result = compute_something(alpha, beta, gamma)  # an ordinary line of code {}\n"


def _best(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    text = "".join(LINE.format(i) for i in range(args.lines)) + "AWS_SECRET_ACCESS_KEY=" + "A" * 40
    probe = re.compile(r"(?i)key|token|secret|password")

    def baseline() -> None:
        for line in text.split("\n"):
            probe.search(line)

    def redact() -> None:
        _redact_cached.cache_clear()  # measure the scan, not the memo
        redact_text(text)

    base, ours = _best(baseline, args.repeat), _best(redact, args.repeat)
    print(f"{len(text) / 1e6:.2f} MB, best of {args.repeat}")
    print(f"baseline (one regex per line): {base * 1000:8.1f} ms")
    print(f"redact_text:                   {ours * 1000:8.1f} ms   ({ours / base:.1f}x baseline, "
          f"{len(text) / 1e6 / ours:.1f} MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
