"""What to do after a dry run: the keys still missing, the command that pays, where the states are."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path


def python_command(executable: str, prefix: str, base_prefix: str, cwd: str) -> str:
    """How to name this interpreter in a command to copy: `python`, or a virtualenv's own below the
    current folder (`make run`'s `.venv/bin/python`), which works without activating it.

    >>> python_command("/w/.venv/bin/python", "/w/.venv", "/usr", "/w")
    '.venv/bin/python'
    >>> python_command("/usr/bin/python3", "/usr", "/usr", "/w")
    'python'
    """
    path = Path(executable)
    if prefix != base_prefix and path.is_relative_to(cwd):
        return str(path.relative_to(cwd))
    return "python"


def paid_command(argv: Sequence[str], python: str = "python") -> str:
    """The dry run's own command without `--dry-run`, quoted for a POSIX shell.

    >>> paid_command(["--source", "my sessions", "--teachers", "gpt-5,deepseek", "--dry-run"])
    "python -m replay.run --source 'my sessions' --teachers gpt-5,deepseek"
    """
    return shlex.join([python, "-m", "replay.run", *(a for a in argv if a != "--dry-run")])


def next_step_lines(argv: Sequence[str], out: str, states: int, teachers: str | None,
                    lacking: Mapping[str, Sequence[str]], python: str = "python") -> list[str]:
    """The lines a dry run ends with. `lacking`: teacher → the environment variables it still needs.

    >>> for line in next_step_lines(["--source", "s", "--out", "o", "--teachers", "gpt-5,deepseek",
    ...                              "--dry-run"], "o", 12, "gpt-5,deepseek",
    ...                             {"gpt-5": ["OPENAI_API_KEY"], "deepseek": ["DEEPSEEK_API_KEY"]}):
    ...     print(line)
    Next:
      1. set the teachers' API keys (gpt-5, deepseek): export OPENAI_API_KEY=... DEEPSEEK_API_KEY=...
      2. ask the teachers (this is what costs money; answers are cached, a rerun never pays twice):
         python -m replay.run --source s --out o --teachers gpt-5,deepseek
      The 12 states are in o/states.jsonl; to look at them first:
         python -m replay.view o     (pages: open o/view/index.html)
         python -m replay.states o   (JSON, one state a line)
    """
    lines, step = ["Next:"], 1
    if teachers is None:
        lines.append(f"  {step}. name the teachers and ask them (this is what costs money), e.g.:")
        lines.append(f"     {paid_command([*argv, '--teachers', 'gpt-5,deepseek'], python)}")
    else:
        if lacking:
            keys = dict.fromkeys(name for names in lacking.values() for name in names)
            lines.append(f"  {step}. set the teachers' API keys ({', '.join(lacking)}): export "
                         + " ".join(f"{name}=..." for name in keys))
            step += 1
        lines.append(f"  {step}. ask the teachers (this is what costs money; answers are cached, a rerun "
                     f"never pays twice):")
        lines.append(f"     {paid_command(argv, python)}")
    quoted = shlex.quote(out)
    lines.append(f"  The {states:,} states are in {out}/states.jsonl; to look at them first:")
    lines.append(f"     {python} -m replay.view {quoted}     (pages: open {out}/view/index.html)")
    lines.append(f"     {python} -m replay.states {quoted}   (JSON, one state a line)")
    return lines
