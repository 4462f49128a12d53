"""Data, not code: teacher aliases, prompts, tool schemas, canonicalisation rules.

The one function here locates a packaged file so every package reads configs the same way.
"""

from importlib.resources import files
from pathlib import Path


def config_path(name: str) -> Path:
    """Path of a packaged config file.

    >>> config_path("system_prompt.j2").name
    'system_prompt.j2'
    """
    return Path(str(files("configs") / name))
