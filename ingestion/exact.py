"""Equality as the written bytes see it (issue #55).

The redaction pass and the state writer reuse what they did for the previous state when its messages or
tools come again. Python's `==` says yes too often for that: it ignores dict key order and takes `1`,
`1.0` and `True` for one another, so a state could carry another request's tool list, in another key
order, and a chat template rendering tools as JSON would build another prompt than the state's own.
Here two values are the same when they are the same object, or equal and serialised to the same JSON
(orjson keeps key order and writes 1, 1.0 and true apart): `==` first, which rules most pairs out (or
in, by identity) in C, the serialisation only for equal values that are distinct objects.
"""

from __future__ import annotations

from operator import is_
from typing import Any

import orjson


def same_json(a: Any, b: Any) -> bool:
    """Whether `a` and `b` are written as the same JSON (a value orjson cannot write counts as not).

    >>> same_json({"a": 1, "b": 2}, {"b": 2, "a": 1}), same_json([1], [1.0]), same_json([1], [True])
    (False, False, False)
    >>> same_json({"a": [1, "x"]}, {"a": [1, "x"]})
    True
    """
    if a is b:
        return True
    if a != b:
        return False
    try:
        return orjson.dumps(a) == orjson.dumps(b)
    except TypeError:   # no plain JSON form (a key that is no string, an int past 64 bits): redo, safe
        return False


def same_prefix(values: list[Any], previous: list[Any]) -> bool:
    """Whether `values` starts with `previous`, element by element as the same JSON; an empty
    `previous` is no prefix (nothing to reuse).

    >>> same_prefix([{"a": 1}, {"b": 2}], [{"a": 1}]), same_prefix([{"a": 1}], [{"a": True}])
    (True, False)
    """
    size = len(previous)
    if not size or len(values) < size or values[:size] != previous:
        return False
    # Mostly the very objects of the previous state: one identity pass in C, then the rest one by one.
    return all(map(is_, values, previous)) or all(map(same_json, values, previous))
