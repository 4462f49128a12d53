"""MkDocs hook: the CLI reference written from the parsers themselves, so it cannot drift.

Every `python -m MODULE` entry point of the project (a package's `__main__.py`, or a module that ends
with `if __name__ == "__main__":`) and every training example (`examples/train_*.py`) is found in the
tree, run with `--help` (and each subcommand with `SUB --help`), and its output replaces the marker
`<!-- cli-reference -->` in reference/cli.md. A new
command appears in the reference without anyone typing it; tests/test_docs.py checks the built page
against `--help` of every entry point.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("replay", "ingestion", "teachers", "consensus", "collect", "configs")
MARKER = "<!-- cli-reference -->"
WIDTH = "100"  # argparse wraps at $COLUMNS: one width here and in the test
_MAIN = re.compile(r'^if __name__ == "__main__":', re.MULTILINE)
_SUBCOMMANDS = re.compile(r"^usage: .*? \{([\w,-]+)\}", re.MULTILINE)


def entry_points(root: Path = ROOT) -> list[str]:
    """Module names runnable with `python -m`, sorted (the pipeline's own first)."""
    found = set()
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            if path.name == "__main__.py":
                found.add(".".join(parts[:-1]))
            elif _MAIN.search(path.read_text(encoding="utf-8")):
                found.add(".".join(parts))
    return sorted(found, key=lambda name: (not name.startswith("replay."), name))


def scripts(root: Path = ROOT) -> list[str]:
    """The example scripts a user runs by path (`python examples/train_dpo.py`)."""
    return sorted(str(p.relative_to(root)) for p in (root / "examples").glob("train_*.py")
                  if _MAIN.search(p.read_text(encoding="utf-8")))


def _argv(command: str) -> list[str]:
    return [command] if command.endswith(".py") else ["-m", command]


def help_text(module: str, *args: str, root: Path = ROOT) -> str:
    """`python -m MODULE ARGS --help` (or `python SCRIPT.py ...`) as a user sees it at 100 columns."""
    env = {**os.environ, "COLUMNS": WIDTH, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, *_argv(module), *args, "--help"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        shown = " ".join(_argv(module) + list(args))
        raise RuntimeError(f"python {shown} --help failed: {done.stderr.strip()}")
    return done.stdout


def commands(root: Path = ROOT) -> list[tuple[str, tuple[str, ...], str]]:
    """(module, subcommand args, --help text) for every entry point and each of its subcommands."""
    out = []
    for module in entry_points(root) + scripts(root):
        text = help_text(module, root=root)
        out.append((module, (), text))
        if match := _SUBCOMMANDS.search(text):
            out += [(module, (sub,), help_text(module, sub, root=root)) for sub in match.group(1).split(",")]
    return out


def reference_markdown(root: Path = ROOT) -> str:
    parts = []
    for module, args, text in commands(root):
        title = " ".join(["python", *_argv(module), *args])
        level = "###" if args else "##"
        parts.append(f"{level} `{title}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs' hook API)
    if MARKER in markdown:
        return markdown.replace(MARKER, reference_markdown())
    return markdown
