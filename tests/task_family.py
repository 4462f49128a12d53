"""A family of SWE-bench-shaped instances a small student can learn from and be judged on (#57).

Six tiny Python packages (one module each, ten functions), and in each one-line bugs of five kinds — a
wrong operator, an off-by-one, a wrong constant, swapped arguments, a missing return — two of each kind
per package: 60 instances. An instance's repository is its package with one bug in place and the tests of
every other function (PASS_TO_PASS); its test patch adds `tests/test_issue.py`, the bugged function's own
test (FAIL_TO_PASS). The problem statement names the file and the call that goes wrong, with what it
returns (computed here by running the buggy and the fixed module) and what it should return.

Everything is derived from the `PACKAGES` table: no randomness, the same rows on every machine. The split
is by package (`split`): the held-out instances are code the student never trained on.

Images (`ensure_images`): the toy's base image (tests/collect_toy.py: debootstrap, python3, pytest, git),
and per instance one `docker build --network none` of `FROM base` + `COPY repo /testbed`, the repository
committed here with fixed dates (no RUN step, so no container starts). Built lazily: only the instances
asked for, only those whose image is missing.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collect.instances import image_name
from tests.collect_toy import EVAL_SCRIPT as _TOY_EVAL  # noqa: F401  (the form EVAL_SCRIPT follows)
from tests.collect_toy import NAMESPACE, PATH_ENV

KINDS = ("operator", "off_by_one", "constant", "swapped_args", "missing_return")

# package -> [(kind, source of the function(s), buggy line(s) as (right, wrong), example call, asserts)]
# A function's source may define a helper first; the entry's test and example call the last function.
PACKAGES: dict[str, list[tuple[str, str, tuple[str, str], str, list[str]]]] = {
    "mathkit": [
        ("operator", "def add(a, b):\n    return a + b\n", ("a + b", "a - b"), "add(2, 3)",
         ["add(2, 3) == 5", "add(-1, 1) == 0"]),
        ("operator", "def average(values):\n    return sum(values) / len(values)\n",
         ("/ len(values)", "* len(values)"), "average([2, 4, 6])", ["average([2, 4, 6]) == 4"]),
        ("off_by_one", "def factorial(n):\n    result = 1\n    for k in range(2, n + 1):\n"
         "        result *= k\n"
         "    return result\n", ("range(2, n + 1)", "range(2, n)"), "factorial(5)",
         ["factorial(5) == 120", "factorial(1) == 1"]),
        ("off_by_one", "def triangle(n):\n    return sum(range(1, n + 1))\n", ("range(1, n + 1)",
         "range(1, n)"),
         "triangle(4)", ["triangle(4) == 10"]),
        ("constant", "def circle_area(r):\n    return 3.14159 * r * r\n", ("3.14159",
         "3.0"), "circle_area(2)",
         ["abs(circle_area(2) - 12.56636) < 1e-6"]),
        ("constant", "def to_fahrenheit(celsius):\n    return celsius * 9 / 5 + 32\n", ("+ 32", "+ 23"),
         "to_fahrenheit(100)", ["to_fahrenheit(100) == 212", "to_fahrenheit(0) == 32"]),
        ("swapped_args", "def power(base, exponent):\n    return base ** exponent\n\n\n"
         "def cube(x):\n    return power(x, 3)\n", ("power(x, 3)", "power(3, x)"), "cube(2)",
         ["cube(2) == 8", "cube(4) == 64"]),
        ("swapped_args", "def ratio(part, whole):\n    return part / whole\n\n\n"
         "def percent(part, whole):\n    return 100 * ratio(part, whole)\n",
         ("100 * ratio(part, whole)", "100 * ratio(whole, part)"), "percent(1, 4)", ["percent(1, 4) == 25"]),
        ("missing_return",
         "def clamp(x, low, high):\n    result = min(max(x, low), high)\n    return result\n",
         (), "clamp(5, 0, 3)", ["clamp(5, 0, 3) == 3", "clamp(-1, 0, 3) == 0", "clamp(2, 0, 3) == 2"]),
        ("missing_return", "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n", (),
         "gcd(12, 18)", ["gcd(12, 18) == 6", "gcd(7, 5) == 1"]),
    ],
    "textkit": [
        ("operator", 'def is_palindrome(text):\n    cleaned = text.lower().replace(" ", "")\n'
         "    return cleaned == cleaned[::-1]\n", ("cleaned == cleaned", "cleaned != cleaned"),
         'is_palindrome("level")', ['is_palindrome("Never odd or even")', 'not is_palindrome("abc")']),
        ("operator", 'def count_vowels(text):\n    return sum(1 for ch in text.lower() if ch in "aeiou")\n',
         ("if ch in", "if ch not in"), 'count_vowels("education")', ['count_vowels("education") == 5']),
        ("off_by_one", 'def initials(name):\n    return "".join(part[0].upper() for part in name.split())\n',
         ("part[0]", "part[1]"), 'initials("ada lovelace")', ['initials("ada lovelace") == "AL"']),
        ("off_by_one", "def truncate(text, width):\n    if len(text) <= width:\n        return text\n"
         '    return text[:width - 1] + "~"\n', ("text[:width - 1]", "text[:width]"), 'truncate("abcdef", 4)',
         ['truncate("abcdef", 4) == "abc~"', 'truncate("ab", 4) == "ab"']),
        ("constant", 'def indent(text, level):\n    return " " * (4 * level) + text\n', ("4 * level",
         "2 * level"),
         'indent("x", 1)', ['indent("x", 1) == "    x"', 'indent("x", 0) == "x"']),
        ("constant", 'def shout(text):\n    return text.upper() + "!"\n', ('+ "!"', '+ "?"'), 'shout("hi")',
         ['shout("hi") == "HI!"']),
        ("swapped_args", "def surround(text, left, right):\n    return left + text + right\n\n\n"
         'def bracket(text):\n    return surround(text, "[", "]")\n',
         ('surround(text, "[", "]")', 'surround(text, "]", "[")'), 'bracket("a")', ['bracket("a") == "[a]"']),
        ("swapped_args", "def replace_word(text, old, new):\n"
         '    return " ".join(new if word == old else word for word in text.split())\n\n\n'
         'def censor(text, word):\n    return replace_word(text, word, "***")\n',
         ('replace_word(text, word, "***")', 'replace_word(text, "***", word)'), 'censor("a bad day", "bad")',
         ['censor("a bad day", "bad") == "a *** day"']),
        ("missing_return", "def title_case(text):\n    words = [word.capitalize() for word in text.split()]\n"
         '    return " ".join(words)\n', (), 'title_case("hello world")',
         ['title_case("hello world") == "Hello World"']),
        ("missing_return", 'def slugify(text):\n    slug = "-".join(text.lower().split())\n'
         "    return slug\n", (),
         'slugify("Hello Big World")', ['slugify("Hello Big World") == "hello-big-world"']),
    ],
    "listkit": [
        ("operator", "def total(values):\n    result = 0\n    for value in values:\n        result += value\n"
         "    return result\n", ("result += value", "result -= value"), "total([1, 2, 3])",
         ["total([1, 2, 3]) == 6", "total([]) == 0"]),
        ("operator", "def evens(values):\n    return [v for v in values if v % 2 == 0]\n", ("== 0]", "== 1]"),
         "evens([1, 2, 3, 4])", ["evens([1, 2, 3, 4]) == [2, 4]"]),
        ("off_by_one", "def last(values):\n    return values[len(values) - 1]\n",
         ("len(values) - 1", "len(values) - 2"), "last([1, 2, 3])", ["last([1, 2, 3]) == 3"]),
        ("off_by_one", "def chunks(values, size):\n"
         "    return [values[i:i + size] for i in range(0, len(values), "
         "size)]\n", ("values[i:i + size]", "values[i:i + size - 1]"), "chunks([1, 2, 3, 4], 2)",
         ["chunks([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]"]),
        ("constant", "def first_or_default(values):\n    return values[0] if values else None\n",
         ("else None", "else 0"), "first_or_default([])",
         ["first_or_default([]) is None", "first_or_default([7]) == 7"]),
        ("constant", "def top_three(values):\n    return sorted(values, reverse=True)[:3]\n", ("[:3]",
         "[:2]"),
         "top_three([5, 1, 4, 2, 3])", ["top_three([5, 1, 4, 2, 3]) == [5, 4, 3]"]),
        ("swapped_args", "def difference(items, removed):\n    return [item for item in items if item not in "
         "removed]\n\n\ndef unique_to_first(first, second):\n    return difference(first, second)\n",
         ("difference(first, second)", "difference(second, first)"), "unique_to_first([1, 2, 3], [2])",
         ["unique_to_first([1, 2, 3], [2]) == [1, 3]"]),
        ("swapped_args", "def insert_at(values, index, value):\n    return values[:index] + [value] + "
         "values[index:]\n\n\ndef prepend(values, value):\n    return insert_at(values, 0, value)\n",
         ("insert_at(values, 0, value)", "insert_at(values, value, 0)"), "prepend([1, 2], 9)",
         ["prepend([1, 2], 9) == [9, 1, 2]"]),
        ("missing_return", "def flatten(nested):\n    flat = [item for group in nested for item in group]\n"
         "    return flat\n", (), "flatten([[1], [2, 3]])", ["flatten([[1], [2, 3]]) == [1, 2, 3]"]),
        ("missing_return", "def dedupe(values):\n    seen = []\n    for value in values:\n"
         "        if value not in seen:\n            seen.append(value)\n    return seen\n", (),
         "dedupe([1, 1, 2])", ["dedupe([1, 1, 2]) == [1, 2]"]),
    ],
    "geomkit": [
        ("operator", "def perimeter(width, height):\n    return 2 * (width + height)\n",
         ("width + height", "width - height"), "perimeter(3, 2)", ["perimeter(3, 2) == 10"]),
        ("operator", "def distance(x1, y1, x2, y2):\n    return ((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5\n",
         ("(y2 - y1) ** 2", "(y2 + y1) ** 2"), "distance(0, 1, 3, 5)", ["distance(0, 1, 3, 5) == 5.0"]),
        ("off_by_one", "def polygon_angle_sum(sides):\n    return (sides - 2) * 180\n",
         ("(sides - 2)", "(sides - 1)"), "polygon_angle_sum(3)", ["polygon_angle_sum(3) == 180"]),
        ("off_by_one", "def grid_points(n):\n"
         "    return [(x, y) for x in range(n + 1) for y in range(n + 1)]\n",
         ("for y in range(n + 1)", "for y in range(n)"), "len(grid_points(2))", ["len(grid_points(2)) == 9"]),
        ("constant", "def degrees(radians):\n    return radians * 180 / 3.141592653589793\n",
         ("radians * 180", "radians * 360"), "degrees(3.141592653589793)",
         ["degrees(3.141592653589793) == 180.0"]),
        ("constant", "def square_area(side):\n    return side ** 2\n", ("side ** 2",
         "side ** 3"), "square_area(3)",
         ["square_area(3) == 9"]),
        ("swapped_args", "def shift(value, offset):\n    return value - offset\n\n\n"
         "def to_origin(point, center):\n"
         "    return (shift(point[0], center[0]), shift(point[1], center[1]))\n",
         ("shift(point[0], center[0])", "shift(center[0], point[0])"), "to_origin((5, 7), (1, 2))",
         ["to_origin((5, 7), (1, 2)) == (4, 5)"]),
        ("swapped_args", "def slope(x1, y1, x2, y2):\n    return (y2 - y1) / (x2 - x1)\n\n\n"
         "def line_slope(start, end):\n    return slope(start[0], start[1], end[0], end[1])\n",
         ("slope(start[0], start[1], end[0], end[1])", "slope(start[1], start[0], end[1], end[0])"),
         "line_slope((0, 0), (2, 6))", ["line_slope((0, 0), (2, 6)) == 3.0"]),
        ("missing_return", "def midpoint(a, b):\n    middle = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)\n"
         "    return middle\n", (), "midpoint((0, 0), (2, 4))", ["midpoint((0, 0), (2, 4)) == (1.0, 2.0)"]),
        ("missing_return", "def bounding_box(points):\n    xs = [p[0] for p in points]\n"
         "    ys = [p[1] for p in points]\n    box = (min(xs), min(ys), max(xs), max(ys))\n"
         "    return box\n", (),
         "bounding_box([(1, 5), (3, 2)])", ["bounding_box([(1, 5), (3, 2)]) == (1, 2, 3, 5)"]),
    ],
    "moneykit": [
        ("operator", "def apply_discount(price, percent):\n    return price - price * percent / 100\n",
         ("price - price", "price + price"), "apply_discount(200, 10)", ["apply_discount(200, 10) == 180"]),
        ("operator", "def split_bill(total, people):\n    return round(total / people, 2)\n",
         ("total / people", "total * people"), "split_bill(90, 3)", ["split_bill(90, 3) == 30"]),
        ("off_by_one", "def installments(total, months):\n    return [round(total / months, 2) for _ in "
         "range(months)]\n", ("range(months)]", "range(months - 1)]"), "installments(300, 3)",
         ["installments(300, 3) == [100.0, 100.0, 100.0]"]),
        ("off_by_one", "def compound(amount, rate, years):\n    for _ in range(years):\n"
         "        amount = amount * (1 + rate)\n    return round(amount, 2)\n",
         ("range(years)", "range(years + 1)"), "compound(100, 0.1, 2)", ["compound(100, 0.1, 2) == 121.0"]),
        ("constant", "def with_tax(price):\n    return round(price * 1.2, 2)\n", ("price * 1.2",
         "price * 1.02"),
         "with_tax(100)", ["with_tax(100) == 120.0"]),
        ("constant", "def cents(amount):\n    return int(round(amount * 100))\n", ("amount * 100",
         "amount * 10"),
         "cents(1.25)", ["cents(1.25) == 125"]),
        ("swapped_args", "def growth(old, new):\n    return round((new - old) / old * 100, 2)\n\n\n"
         "def yearly_growth(last_year, this_year):\n    return growth(last_year, this_year)\n",
         ("return growth(last_year, this_year)", "return growth(this_year, last_year)"),
         "yearly_growth(100, 150)", ["yearly_growth(100, 150) == 50.0"]),
        ("swapped_args", "def change_due(paid, price):\n    return round(paid - price, 2)\n\n\n"
         "def checkout(price, paid):\n    return change_due(paid, price)\n",
         ("return change_due(paid, price)", "return change_due(price, paid)"), "checkout(7.5, 10)",
         ["checkout(7.5, 10) == 2.5"]),
        ("missing_return",
         "def total_cost(items):\n    cost = sum(price * quantity for price, quantity in items)\n"
         "    return cost\n", (), "total_cost([(2, 3), (1, 4)])", ["total_cost([(2, 3), (1, 4)]) == 10"]),
        ("missing_return", 'def format_money(amount):\n    text = f"${amount:,.2f}"\n    return text\n', (),
         "format_money(1234.5)", ['format_money(1234.5) == "$1,234.50"']),
    ],
    "timekit": [
        ("operator", "def to_minutes(hours, minutes):\n    return hours * 60 + minutes\n",
         ("+ minutes", "- minutes"), "to_minutes(2, 30)", ["to_minutes(2, 30) == 150"]),
        ("operator", "def is_leap(year):\n"
         "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n",
         ("year % 100 != 0", "year % 100 == 0"), "is_leap(2024)", ["is_leap(2024)", "not is_leap(1900)"]),
        ("off_by_one", "def days_inclusive(start_day, end_day):\n    return end_day - start_day + 1\n",
         ("end_day - start_day + 1", "end_day - start_day"), "days_inclusive(3, 5)",
         ["days_inclusive(3, 5) == 3"]),
        ("off_by_one", "def weekday_name(index):\n"
         '    names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]\n'
         "    return names[index % 7]\n", ("names[index % 7]", "names[(index + 1) % 7]"), "weekday_name(0)",
         ['weekday_name(0) == "Mon"', 'weekday_name(8) == "Tue"']),
        ("constant", "def to_seconds(hours):\n    return hours * 3600\n", ("hours * 3600", "hours * 360"),
         "to_seconds(2)", ["to_seconds(2) == 7200"]),
        ("constant", "def hours_in(days):\n    return days * 24\n", ("days * 24", "days * 12"), "hours_in(2)",
         ["hours_in(2) == 48"]),
        ("swapped_args", "def elapsed(start, end):\n    return end - start\n\n\n"
         "def duration(start_minute, end_minute):\n    return elapsed(start_minute, end_minute)\n",
         ("return elapsed(start_minute, end_minute)", "return elapsed(end_minute, start_minute)"),
         "duration(10, 45)", ["duration(10, 45) == 35"]),
        ("swapped_args", 'def clock(hours, minutes):\n    return f"{hours:02d}:{minutes:02d}"\n\n\n'
         "def from_minutes(total):\n    return clock(total // 60, total % 60)\n",
         ("clock(total // 60, total % 60)", "clock(total % 60, total // 60)"), "from_minutes(135)",
         ['from_minutes(135) == "02:15"']),
        ("missing_return", 'def parse_clock(text):\n    hours, minutes = text.split(":")\n'
         "    total = int(hours) * 60 + int(minutes)\n    return total\n", (), 'parse_clock("02:15")',
         ['parse_clock("02:15") == 135']),
        ("missing_return",
         "def age(birth_year, year):\n    years = year - birth_year\n    return years\n", (),
         "age(1990, 2025)", ["age(1990, 2025) == 35"]),
    ],
}
HELD_OUT = ("moneykit", "timekit")     # the split is by package: these two are never trained on
GITIGNORE = "__pycache__/\n.pytest_cache/\n"


@dataclass(frozen=True)
class Task:
    """One instance: its package, the function that is wrong, and the fix as one snippet replaced."""

    package: str
    index: int
    kind: str
    function: str
    wrong: str          # the buggy snippet, unique in the buggy module
    right: str          # what it replaces it with
    example: str
    asserts: tuple[str, ...]

    @property
    def instance_id(self) -> str:
        return f"tiny__{self.package}-{self.index + 1}"

    @property
    def path(self) -> str:
        return f"{self.package}.py"


def _function(source: str) -> str:
    """The last function a source defines: the one its entry is about.

    >>> _function("def a():\\n    pass\\n\\n\\ndef b(x):\\n    return a()\\n")
    'b'
    """
    return source.rsplit("def ", 1)[1].split("(", 1)[0]


def _snippets(kind: str, source: str, bug: tuple[str, ...]) -> tuple[str, str]:
    """(right, wrong): a missing return is the function's last two lines without the `return ` keyword."""
    if kind != "missing_return":
        return bug[0], bug[1]
    lines = source.rstrip("\n").split("\n")
    right = "\n".join(lines[-2:])
    return right, right.replace("    return ", "    ", 1)


def tasks() -> list[Task]:
    """Every instance of the family, package by package, in table order."""
    out = []
    for package, entries in PACKAGES.items():
        for index, (kind, source, bug, example, asserts) in enumerate(entries):
            right, wrong = _snippets(kind, source, bug)
            out.append(Task(package, index, kind, _function(source), wrong, right, example, tuple(asserts)))
    return out


def module_text(package: str, bugged: Task | None = None) -> str:
    """The package's module, with `bugged`'s bug in place."""
    text = "\n\n".join(entry[1] for entry in PACKAGES[package])
    if bugged is None:
        return text
    if text.count(bugged.right) != 1:
        raise ValueError(f"{bugged.instance_id}: {bugged.right!r} is not unique in {package}.py")
    text = text.replace(bugged.right, bugged.wrong)
    if text.count(bugged.wrong) != 1:
        raise ValueError(f"{bugged.instance_id}: {bugged.wrong!r} is not unique in the buggy {package}.py")
    return text


def pytest_file(package: str, functions: list[str], asserts: list[tuple[str, ...]]) -> str:
    """A pytest file: one test per function, its asserts."""
    lines = [f"from {package} import {', '.join(sorted(set(functions)))}", ""]
    for function, checks in zip(functions, asserts, strict=True):
        lines += ["", f"def test_{function}():", *(f"    assert {check}" for check in checks), ""]
    return "\n".join(lines)


def repo_files(task: Task) -> dict[str, str]:
    """The instance's repository at its base commit: the buggy module and the other functions' tests."""
    others = [t for t in tasks() if t.package == task.package and t.index != task.index]
    return {task.path: module_text(task.package, task),
            f"tests/test_{task.package}.py": pytest_file(task.package, [t.function for t in others],
                                                      [t.asserts for t in others]),
            ".gitignore": GITIGNORE}


def _new_file_diff(path: str, text: str) -> str:
    lines = text.splitlines()
    return "".join([f"diff --git a/{path} b/{path}\n", "new file mode 100644\n", "--- /dev/null\n",
                    f"+++ b/{path}\n", f"@@ -0,0 +1,{len(lines)} @@\n", *(f"+{line}\n" for line in lines)])


def _diff(path: str, before: str, after: str) -> str:
    body = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(body)


def _outcome(module: str, example: str) -> str:
    """What `example` gives with `module`'s functions: its repr, or the exception it raises."""
    space: dict[str, Any] = {}
    exec(compile(module, "<module>", "exec"), space)  # noqa: S102 - the family's own table
    try:
        return repr(eval(example, space))  # noqa: S307
    except Exception as error:  # noqa: BLE001 - what a user would report
        return f"an error ({type(error).__name__}: {error})"


def eval_script(task: Task, test_patch: str) -> str:
    """The toy's eval script (tests/collect_toy.py) for a family instance: add the issue's test, run
    every test between the harness's markers, take the test away again."""
    return f"""#!/bin/bash
set -uxo pipefail
cd /testbed
rm -f tests/test_issue.py
git apply -v - <<'EOF_114329324912'
{test_patch}EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests
: '>>>>> End Test Output'
rm -f tests/test_issue.py
"""


def instance(task: Task) -> dict[str, Any]:
    """The SWE-bench row of a task (the toy's form: its own eval_script and log_parser)."""
    buggy, fixed = module_text(task.package, task), module_text(task.package)
    got, want = _outcome(buggy, task.example), _outcome(fixed, task.example)
    statement = (f"In {task.path}, `{task.example}` returns {got}, but it should return {want}. "
                 f"Please fix `{task.function}`.")
    test_patch = _new_file_diff("tests/test_issue.py",
                                pytest_file(task.package, [task.function], [task.asserts]))
    others = [t for t in tasks() if t.package == task.package and t.index != task.index]
    return {
        "repo": f"tiny/{task.package}", "instance_id": task.instance_id, "base_commit": "HEAD",
        "version": "1.0", "problem_statement": statement, "hints_text": "",
        "created_at": "2025-01-01T00:00:00Z", "environment_setup_commit": "HEAD",
        "patch": _diff(task.path, buggy, fixed), "test_patch": test_patch,
        "FAIL_TO_PASS": json.dumps([f"tests/test_issue.py::test_{task.function}"]),
        "PASS_TO_PASS": json.dumps([f"tests/test_{task.package}.py::test_{t.function}" for t in others]),
        "eval_script": eval_script(task, test_patch), "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail", "bug_kind": task.kind,
    }


def split(rows: list[dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training, held-out) rows: the held-out ones are the packages in HELD_OUT.

    >>> train, held = split()
    >>> len(train), len(held), sorted({r["repo"] for r in held})
    (40, 20, ['tiny/moneykit', 'tiny/timekit'])
    """
    rows = rows if rows is not None else [instance(t) for t in tasks()]
    held = [r for r in rows if r["repo"].split("/", 1)[1] in HELD_OUT]
    return [r for r in rows if r not in held], held


def family_tag() -> str:
    """The image tag: a hash of everything an image holds, so editing the table rebuilds them."""
    from tests.collect_toy import BASE_IMAGE

    text = json.dumps([PACKAGES, BASE_IMAGE, DOCKERFILE, GITIGNORE], sort_keys=True)
    return "family-" + hashlib.sha256(text.encode()).hexdigest()[:10]


DOCKERFILE_BASE = "FROM {base}\nENV {path} LANG=C.UTF-8\nCOPY repo /testbed\nWORKDIR /testbed\n"
DOCKERFILE = DOCKERFILE_BASE.format(base="BASE", path=PATH_ENV)


def _commit(folder: Path, files: dict[str, str]) -> None:
    """The repository at its base commit, made here: fixed author and dates, so the commit is stable."""
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    env = {"GIT_AUTHOR_NAME": "tiny", "GIT_AUTHOR_EMAIL": "tiny@example.invalid",
           "GIT_COMMITTER_NAME": "tiny", "GIT_COMMITTER_EMAIL": "tiny@example.invalid",
           "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
           "PATH": "/usr/bin:/bin", "HOME": str(folder)}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        subprocess.run(argv, cwd=folder, env=env, check=True, capture_output=True)


def ensure_images(client: Any, rows: list[dict[str, Any]]) -> tuple[str, dict[str, float]]:
    """Build the images of `rows` that are missing; returns (the --image-tag, seconds per image built)."""
    from tests.collect_toy import BASE_IMAGE, _exists, ensure_base_image

    tag = family_tag()
    by_id = {t.instance_id: t for t in tasks()}
    built: dict[str, float] = {}
    for row in rows:
        name = image_name(row["instance_id"], NAMESPACE, tag)
        if _exists(client, name):
            continue
        ensure_base_image(client)
        began = time.monotonic()
        with tempfile.TemporaryDirectory() as context:
            _commit(Path(context, "repo"), repo_files(by_id[row["instance_id"]]))
            Path(context, "Dockerfile").write_text(DOCKERFILE_BASE.format(base=BASE_IMAGE, path=PATH_ENV))
            client.images.build(path=context, tag=name, network_mode="none", rm=True, forcerm=True)
        built[row["instance_id"]] = round(time.monotonic() - began, 2)
    return tag, built


def write_split(out: Path, train: int | None = None, held: int | None = None) -> tuple[Path, Path]:
    """train.jsonl and held.jsonl under `out`: the first `train` / `held` rows of each side, taken
    round-robin over the packages so that a few rows still span every package and kind."""
    train_rows, held_rows = split()
    out.mkdir(parents=True, exist_ok=True)
    paths = out / "train.jsonl", out / "held.jsonl"
    for path, rows, count in zip(paths, (train_rows, held_rows), (train, held), strict=True):
        picked = _round_robin(rows)[:count] if count is not None else rows
        path.write_text("".join(json.dumps(row) + "\n" for row in picked))
    return paths


def _round_robin(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows interleaved package by package: the first of each package, then the second of each, ...

    >>> rows = [{"repo": "a", "id": 1}, {"repo": "a", "id": 2}, {"repo": "b", "id": 3}]
    >>> [r["id"] for r in _round_robin(rows)]
    [1, 3, 2]
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["repo"], []).append(row)
    longest = max((len(g) for g in groups.values()), default=0)
    return [g[i] for i in range(longest) for g in groups.values() if i < len(g)]
