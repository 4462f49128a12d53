"""Make docs/view-state.png, the README's picture of a state page: a run over examples/sessions with
three scripted teachers on loopback, `replay.run --view`, then headless Chromium's `--screenshot`.

    python docs/screenshot.py            # needs Debian's chromium
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ingestion.store import load_states  # noqa: E402
from replay.run import main as run_main  # noqa: E402
from tests.llm_server import LLMServer, Reply, chat_completion  # noqa: E402

TRACE, TURN = "b2508ebf-1507-5e80-859f-c23791657dd9", 1     # fix-add: the tests are about to run
COMMANDS = {"a": "python3 -m pytest -q test_calc.py", "b": "python3 -m pytest -q test_calc.py",
            "c": "python3 -m unittest -q test_calc"}


def teachers(body: dict[str, Any]) -> Reply:
    model = body.get("model", "")
    call = {"name": "Bash", "arguments": {"command": COMMANDS[model], "description": "Run the tests"}}
    return Reply(chat_completion(tool_calls=[call], model=model))


def main() -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("needs Debian's chromium: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as tmp, LLMServer(teachers) as server:
        out = Path(tmp) / "run"
        pool = ",".join(f"{n}=openai/{n}@{server.url}" for n in "abc")
        run_main(["--source", str(ROOT / "examples/sessions"), "--out", str(out), "--teachers", pool,
                  "--cache", str(Path(tmp) / "cache.sqlite"), "--view"])
        states = load_states(out)   # the one reader of stored states (ingestion/store.py)
        number = next(i for i, s in enumerate(states) if s.trace_id == TRACE and s.turn == TURN)
        page = f"{(out / 'view' / 'state.html').as_uri()}#{number}"   # one page draws every state
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--no-first-run", f"--user-data-dir={tmp}/profile", "--window-size=1280,1500",
                        f"--screenshot={ROOT / 'docs/view-state.png'}", page],
                       check=True, capture_output=True, timeout=120)
    print(ROOT / "docs/view-state.png")


if __name__ == "__main__":
    main()
