"""Issue #35 item 4: a dry run ends with the next step for this run: the keys it lacks, the command that
pays (the same command without --dry-run, which then runs), where the states are and how to view them."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import teachers.registry
from replay.run import main as run_main
from tests.cli import ROOT, pool
from tests.llm_server import LLMServer, Reply, chat_completion

EXAMPLES = ROOT / "examples" / "sessions"


def _dry_run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "replay.run", "--source", str(EXAMPLES), "--out",
                           str(tmp_path / "out"), *args, "--dry-run"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.rstrip("\n").splitlines()


def test_dry_run_names_missing_keys_and_the_paid_command(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY")}
    lines = _dry_run(tmp_path, "--teachers", "gpt-5,deepseek", env=env)
    tail = "\n".join(lines[-7:])
    assert lines[-7] == "Next:"
    assert "export OPENAI_API_KEY=... DEEPSEEK_API_KEY=..." in tail
    command = next(line.strip() for line in lines[-7:] if " -m replay.run " in line)
    assert "--dry-run" not in command and "--teachers gpt-5,deepseek" in command
    assert f"-m replay.view {tmp_path / 'out'}" in tail and "12 states" in tail


def test_the_command_it_names_runs(tmp_path: Path) -> None:
    """With teachers of our own (no keys needed) the next step is the command itself, and it pays."""
    with LLMServer(lambda body: Reply(chat_completion("Done."))) as server:
        lines = _dry_run(tmp_path, "--teachers", pool(server.url, "a", "b"))
        assert not any("export" in line for line in lines[-6:])
        command = next(line.strip() for line in lines[-6:] if " -m replay.run " in line)
        argv = shlex.split(command)
        done = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        assert server.requests, "the paid command asked no teacher"
    assert (tmp_path / "out" / "proposals.jsonl").is_file()
    assert "Next:" not in done.stdout


def test_without_teachers_it_shows_how_to_name_them(tmp_path: Path) -> None:
    lines = _dry_run(tmp_path)
    assert any("--teachers gpt-5,deepseek" in line for line in lines[-6:])


def test_a_dry_run_parses_the_pool_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """#47 item 4: the next step names the missing keys from the pool the run parsed, not a second parse
    (`parse_pool` is imported where it is used, so the counting wrapper sees every call)."""
    parsed: list[object] = []
    real = teachers.registry.parse_pool

    def counting(text: object) -> list[teachers.registry.TeacherSpec]:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(teachers.registry, "parse_pool", counting)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    assert run_main(["--source", str(EXAMPLES), "--out", str(tmp_path / "out"), "--teachers",
                     "gpt-5,deepseek", "--dry-run"]) == 0
    assert parsed == ["gpt-5,deepseek"]
    assert "export OPENAI_API_KEY=... DEEPSEEK_API_KEY=..." in capsys.readouterr().out
