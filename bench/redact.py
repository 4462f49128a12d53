"""Redaction speed on a large prompt: `python -m bench.redact [--lines N] [--repeat R]`.

What `tests/test_teachers_redact.py` used to assert with a stopwatch (and failed on a busy machine):
how long `redact_text` takes on ~0.8 MB of ordinary code with one secret at the end, and on ~0.8 MB of
the test corpus (planted secrets and look-alikes, secret-dense), each printed beside a baseline that
every scan must pay anyway (one compiled regex over every line), as a ratio. Medians of `--repeat`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # `python bench/redact.py`: this folder must not shadow the packages

from teachers.redact import redact_found, redact_text  # noqa: E402

LINE = "    result = compute_something(alpha, beta, gamma)  # an ordinary line of code {}\n"


def _median(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _corpus(size: int) -> str:
    from tests.secret_corpus import BENIGN, SECRETS

    block = "\n".join([s.text for s in SECRETS] + BENIGN) + "\n"
    return block * max(size // len(block), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    code = "".join(LINE.format(i) for i in range(args.lines)) + "AWS_SECRET_ACCESS_KEY=" + "A1b2" * 10
    probe = re.compile(r"(?i)key|token|secret|password")
    for name, text in (("code", code), ("corpus", _corpus(len(code)))):
        def baseline(text: str = text) -> None:
            for line in text.split("\n"):
                probe.search(line)

        def redact(text: str = text) -> None:
            redact_found.cache_clear()  # measure the scan, not the memo
            redact_text(text)

        base, ours = _median(baseline, args.repeat), _median(redact, args.repeat)
        print(f"{name}: {len(text) / 1e6:.2f} MB, median of {args.repeat}")
        print(f"  baseline (one regex per line): {base * 1000:8.1f} ms")
        print(f"  redact_text:                   {ours * 1000:8.1f} ms   ({ours / base:.1f}x baseline, "
              f"{len(text) / 1e6 / ours:.1f} MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
