"""`collect.run --ray` flags that fail before any cluster or container: one line, exit 2 (no docker)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_ray_address_where_nothing_listens_is_one_line(tmp_path: Path) -> None:
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps({"instance_id": "a__b-1", "problem_statement": "x"}) + "\n")
    address = f"127.0.0.1:{closed_port()}"
    argv = [sys.executable, "-m", "collect.run", "--instances", str(instances), "--student-url",
            "http://127.0.0.1:9/v1", "--student-model", "s", "--out", str(tmp_path / "out"), "--ray", address]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    why = "Connection refused"
    assert done.stderr == f"collect.run: error: cannot join the Ray cluster at {address}: {why}\n"

    assert not (tmp_path / "out").exists()


def test_ray_help_names_the_safe_defaults() -> None:
    done = subprocess.run([sys.executable, "-m", "collect.run", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    text = " ".join(done.stdout.split())
    assert "--ray ADDRESS" in text and "127.0.0.1 only" in text and "--ray-dashboard" in text
    assert "--samples SAMPLES" in text
