"""Token-prefix breaks of rollouts with parallel tool calls, per vLLM shape (#34 item 3).

    python bench/prefix_parallel.py [--json OUT]

Every shape collect/ supports (vLLM 0.10.2 and 0.33.0 × the hermes and qwen3_coder tool parsers), the
stand-in serving the model's own chat template and Qwen's BPE (tests/vllm_server.py `template="model"`).
The student makes 2 or 3 calls in parallel on each of its first two turns, then fixes the bug (6 turns, 5
transitions a rollout). It writes each turn as its template renders it, with or without a line of
text before the calls, or, as a sampled model sometimes does, otherwise: a blank line between the
calls, a line of text between them, a newline after them. A transition breaks when the next prompt's
token ids do not start with the previous prompt + completion (counted from the ids themselves, not
from collect's own `prefix_ok`), so the same script measures any checkout: run it in one from before
the fix with this file, tests/vllm_server.py, tests/vllm_formats.py, tests/test_collect_parallel.py and
configs/chat_templates/qwen3_coder.jinja (+ its templates.toml entry) copied in.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.test_collect_parallel import OFF_TEMPLATE, SCRIPTS, SHAPES, model, roll, served  # noqa: E402
from tests.vllm_server import VLLMServer  # noqa: E402

WRITTEN = {"as its template": (None, None), "a line before the calls": ("Let me look at both first.", None),
           **{name: (None, rewrite) for name, rewrite in sorted(OFF_TEMPLATE.items())}}


def breaks(turns: list[dict]) -> tuple[int, int, Counter[str]]:
    """(transitions, breaks, the breaks' recorded reasons) of one rollout."""
    pairs = list(zip(turns, turns[1:], strict=False))
    prefixes = [(one["prompt_token_ids"] + one["completion_token_ids"], two) for one, two in pairs]
    broken = [after for prefix, after in prefixes if after["prompt_token_ids"][:len(prefix)] != prefix]
    reasons = Counter((turn.get("prefix_break") or {}).get("reason", "not recorded") for turn in broken)
    return len(pairs), len(broken), reasons


def measure() -> list[dict]:
    rows = []
    for version, fmt in SHAPES:
        for written, (content, rewrite) in WRITTEN.items():
            for calls in (2, 3):
                student = model(fmt, SCRIPTS[calls], content, rewrite)
                with tempfile.TemporaryDirectory() as tmp, VLLMServer(student, served(version, fmt)) as vllm:
                    result, turns = roll(Path(tmp), vllm)
                transitions, broken, reasons = breaks(turns)
                rows.append({"vllm": version, "parser": fmt, "written": written, "calls": calls,
                             "exit_status": result.exit_status, "transitions": transitions, "breaks": broken,
                             "reasons": dict(reasons)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    rows = measure()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "?"
    print(f"checkout {commit}")
    print(f"{'vLLM':5} {'parser':12} {'written':26} calls  breaks/transitions  reasons")
    for row in rows:
        print(f"{row['vllm']:5} {row['parser']:12} {row['written']:26} {row['calls']:5}  "
              f"{row['breaks']:>6}/{row['transitions']:<11}  {row['reasons'] or ''}")
    for version, fmt in SHAPES:
        mine = [r for r in rows if (r["vllm"], r["parser"]) == (version, fmt)]
        print(f"{version} {fmt}: {sum(r['breaks'] for r in mine)} breaks in "
              f"{sum(r['transitions'] for r in mine)} transitions of {len(mine)} rollouts")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
