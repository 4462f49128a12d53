"""Which teacher pools an ablation computes, and their names and folders. Pure."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from itertools import combinations

from ingestion.schema import ReplayError

MAX_SUBSET_TEACHERS = 8  # --all-subsets: 2^8 - 1 = 255 pools, each a dataset; beyond that, name the pools
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
_MAX_DIRNAME = 120
class AblationError(ReplayError):
    """A pool that cannot be computed from the run as asked (unknown teacher, missing answers, ...)."""


def pool_name(teachers: Sequence[str]) -> str:
    """A pool's name: its teachers joined by `+`.

    >>> pool_name(["gpt-5", "deepseek"])
    'gpt-5+deepseek'
    """
    return "+".join(teachers)


def pool_dirname(teachers: Sequence[str]) -> str:
    """A folder name for a pool, safe on any filesystem; a name that had to change gets a short hash,
    so two pools never share a folder.

    >>> pool_dirname(["gpt-5", "deepseek"]), pool_dirname(["openrouter/qwen/qwen3-coder"])
    ('gpt-5+deepseek', 'openrouter_qwen_qwen3-coder-ef13f0')
    """
    name = pool_name(teachers)
    safe = _UNSAFE.sub("_", name).strip("._") or "pool"
    if safe == name and len(name) <= _MAX_DIRNAME:
        return name
    return f"{safe[:_MAX_DIRNAME]}-{hashlib.sha256(name.encode()).hexdigest()[:6]}"


def split_pools(text: str) -> list[list[str]]:
    """`--pools "a,b;a;b"` → one list of entries per pool (empty pools dropped).

    >>> split_pools("gpt-5, deepseek; gpt-5 ;; deepseek")
    [['gpt-5', 'deepseek'], ['gpt-5'], ['deepseek']]
    """
    pools = [[entry.strip() for entry in group.split(",") if entry.strip()] for group in text.split(";")]
    return [pool for pool in pools if pool]


def all_subsets(teachers: Sequence[str]) -> list[tuple[str, ...]]:
    """Every non-empty subset, largest first, each in the given teacher order.

    >>> all_subsets(["a", "b", "c"])
    [('a', 'b', 'c'), ('a', 'b'), ('a', 'c'), ('b', 'c'), ('a',), ('b',), ('c',)]
    """
    if len(teachers) > MAX_SUBSET_TEACHERS:
        raise AblationError(f"--all-subsets with {len(teachers)} teachers makes {2 ** len(teachers) - 1} "
                            f"pools; at most {MAX_SUBSET_TEACHERS} teachers: name the pools with --pools "
                            f"or use --leave-one-out")
    return [combo for size in range(len(teachers), 0, -1) for combo in combinations(teachers, size)]


def leave_one_out(teachers: Sequence[str]) -> list[tuple[str, ...]]:
    """The full pool, then the pool without each teacher in turn (an empty pool is skipped).

    >>> leave_one_out(["a", "b", "c"])
    [('a', 'b', 'c'), ('b', 'c'), ('a', 'c'), ('a', 'b')]
    """
    rest = [tuple(t for t in teachers if t != left) for left in teachers]
    return [tuple(teachers), *(pool for pool in rest if pool)]


def unique_pools(full: Sequence[str], pools: Iterable[Sequence[str]]) -> list[tuple[str, ...]]:
    """The full pool first, then each other pool once (a pool is a set: `b,a` is `a,b`), teachers in
    the full pool's order, teachers new to it after, in the order given.

    >>> unique_pools(["a", "b"], [["b", "a"], ["x", "a"], ["a", "x"], ["b"]])
    [('a', 'b'), ('a', 'x'), ('b',)]
    """
    rank = {name: i for i, name in enumerate(full)}
    out, seen = [tuple(full)], {frozenset(full)}
    for pool in pools:
        members = list(dict.fromkeys(pool))
        ordered = tuple(sorted(members, key=lambda t: (rank.get(t, len(rank)), members.index(t))))
        if frozenset(ordered) not in seen:
            seen.add(frozenset(ordered))
            out.append(ordered)
    return out


