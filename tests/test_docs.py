"""Issue #35: the documentation site builds with `mkdocs build --strict`, its CLI reference is every entry
point's `--help` as the code prints it, and a broken link or anchor fails the build."""

from __future__ import annotations

import html
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT / "docs" / "hooks" / "cli_reference.py"


def _hook():
    spec = importlib.util.spec_from_file_location("cli_reference", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mkdocs(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra: pip install -e '.[dev]'")
    return subprocess.run([sys.executable, "-m", "mkdocs", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin",
                                            "LITELLM_LOCAL_MODEL_COST_MAP": "True"})


def test_every_entry_point_is_found() -> None:
    hook = _hook()
    assert {"replay.run", "replay.ablate", "replay.eval", "replay.verify", "replay.view", "replay.states",
            "collect.run", "collect.claude_code_cli"} <= set(hook.entry_points())
    assert hook.scripts() == ["examples/train_dpo.py", "examples/train_kto.py", "examples/train_sft.py"]


def test_the_site_builds_strict_and_its_reference_is_every_help(tmp_path: Path) -> None:
    done = _mkdocs("build", "--strict", "--site-dir", str(tmp_path / "site"), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    for module, args, help_text in _hook().commands():
        assert help_text.rstrip() in text, f"{module} {args}: --help is not on the reference page"


def test_a_broken_anchor_fails_the_build(tmp_path: Path) -> None:
    """Our mkdocs.yml's validation settings, on two pages, one linking to an anchor the other lacks."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the part](other.md#no-such-part).\n")
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A part\n")
    site = {key: config[key] for key in ("strict", "validation", "markdown_extensions")}
    site |= {"site_name": "t", "docs_dir": "docs", "nav": ["index.md", "other.md"]}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(site))
    broken = _mkdocs("build", "--strict", cwd=tmp_path)
    assert broken.returncode != 0 and "no-such-part" in broken.stderr
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the part](other.md#a-part).\n")
    assert _mkdocs("build", "--strict", cwd=tmp_path).returncode == 0
