"""Make tests/data/agent_lightning/ again: `python -m tests.agl_fixtures` (needs the package index once,
for the two agentlightning venvs of tests/agl_venvs.py; nothing leaves 127.0.0.1 after that).

- `seed/stream_<id>.json`: the seed example's span streams, recorded by agentlightning 0.3.0;
- `gateway/rollouts.agl.jsonl`: an export of agentlightning 1.0.2's Gateway, written by
  `python -m ingestion.agent_lightning.export`;
- `anthropic/stream_<id>.json`: 0.3.0's span streams of two OpenAI-API rollouts and, between them, one
  on the Anthropic Messages API (tests/agl_anthropic.py, issue #55).

The wheel test (tests/test_wheel.py) reads them without installing agent-lightning; tests/test_agl_*.py
make fresh ones with the real packages.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ingestion.agent_lightning.export import write_export
from tests import agl_anthropic
from tests.agl_rollouts import gateway, gateway_rollouts, seed_streams
from tests.agl_venvs import python_of

DATA = Path(__file__).resolve().parent / "data" / "agent_lightning"


def make(data: Path = DATA) -> None:
    with tempfile.TemporaryDirectory() as work:
        seed_streams(python_of("0.3.0"), Path(work) / "seed")
        shutil.rmtree(data / "seed", ignore_errors=True)
        (data / "seed").mkdir(parents=True)
        for stream in sorted((Path(work) / "seed").glob("stream_*.json")):
            shutil.copy(stream, data / "seed" / stream.name)
        with gateway(python_of("1.0.2")) as url:
            gateway_rollouts(url, Path(work) / "agent")
            write_export(url, data / "gateway" / "rollouts.agl.jsonl")
    agl_anthropic.make(data / "anthropic")


if __name__ == "__main__":
    make()
    print(DATA)
