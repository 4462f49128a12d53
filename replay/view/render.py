"""Templates to files: jinja2 with autoescape on everywhere, and the list's index as script files.

Session text is untrusted: every value reaches the page through an autoescaped template, or through
`textContent` in assets/view.js and assets/state.js, never as markup. The index is JSON inside script
files (browsers refuse `fetch` from file:// pages, but load scripts), with "</" escaped so that no
string can end a script early.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
CHUNK_ROWS = 5_000            # index rows per script file (~0.5 MB)


@cache
def environment() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render(name: str, **context: Any) -> bytes:
    """One page as bytes (UTF-8)."""
    return environment().get_template(name).render(**context).encode("utf-8")


def write_page(path: Path, name: str, **context: Any) -> int:
    """Render `name` into `path`; the page's size in bytes."""
    data = render(name, **context)
    path.write_bytes(data)
    return len(data)


def script_data(before: str, value: Any, after: str = ";") -> bytes:
    """A line of JavaScript holding JSON data, safe whatever the strings hold.

    >>> script_data("REPLAY.meta = ", {"trace": ["</script><b>"]})
    b'REPLAY.meta = {"trace":["<\\\\/script><b>"]};\\n'
    """
    # orjson leaves "</" as it is: escaped here, so no string can end a script element early.
    return before.encode() + orjson.dumps(value).replace(b"</", b"<\\/") + after.encode() + b"\n"


def write_index(folder: Path, meta: dict[str, list[str]], rows: list[list[Any]]) -> tuple[list[str], int]:
    """data/meta.js and data/index-N.js; (the chunk file names, the largest file's size)."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    head = b"window.REPLAY = window.REPLAY || {meta: {}, rows: []};\n"
    largest = _write(data / "meta.js", head + script_data("REPLAY.meta = ", meta))
    names = []
    for start in range(0, len(rows), CHUNK_ROWS) or [0]:
        name = f"index-{start // CHUNK_ROWS}.js"
        names.append(name)
        body = script_data("REPLAY.rows.push.apply(REPLAY.rows, ", rows[start:start + CHUNK_ROWS], ");")
        largest = max(largest, _write(data / name, body))
    return names, largest


def copy_assets(folder: Path, extra: Iterable[tuple[Path, str]] = ()) -> None:
    """The stylesheet and script, and files such as the ablation plot, into the view."""
    (folder / "assets").mkdir(parents=True, exist_ok=True)
    for asset in (HERE / "assets").iterdir():
        shutil.copyfile(asset, folder / "assets" / asset.name)
    for source, name in extra:
        shutil.copyfile(source, folder / name)


def _write(path: Path, data: bytes) -> int:
    path.write_bytes(data)
    return len(data)
