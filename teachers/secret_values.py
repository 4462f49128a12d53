"""Is this value a secret, or only next to a secret-sounding name? (the `judge` of configs/redact.toml)

A name is never a secret by itself: `DB_PASSWORD=${DB_PASSWORD}` holds a reference, `token: str` a type,
`password = get_password()` a call. Over-redaction corrupts training data, so each rule that keys on a
name says how strictly its value is judged.
"""

from __future__ import annotations

import re

from teachers.secret_rules import shannon_entropy

_REFERENCE = re.compile(r"""^(?:\$\{?[A-Za-z_][\w.]*\}?|\$\(|%[A-Za-z_]\w*%|\{\{.*\}\}|\$\{\{.*\}\}"""
                        r"""|<[^<>]*>|\{[^{}]*\}|@[A-Za-z_]\w*@|\[REDACTED:)""")
_PLACEHOLDER = re.compile(r"^(?:your|my|the|some|a|an|example|sample|dummy|placeholder|redacted|changeme|"
                          r"xxx+|\*+|\.{3,}|…|none|null|nil|undefined|empty|todo|tbd|secret|password|"
                          r"token|test|string|str|bytes|optional|required|hidden)(?:$|[-_ .])", re.I)
_FILLER = re.compile(r"^(.)\1+$|x{4,}|\*{3,}", re.I)
_SCALAR = re.compile(r"^(?:true|false|yes|no|on|off|null|none|nil|-?\d+(?:\.\d+)?)$", re.I)
_CODE = re.compile(r"[()\[\]{}]|os\.environ|process\.env|getenv|^(?:f|b|r)?[\"'].*\{|=>|\s(?:if|or|and)\s")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PATH_OR_URL = re.compile(r"^(?:~?/|\./|\.\./|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://[^@\s]*$)")
_HYPHEN_WORDS = re.compile(r"^[a-z]+(?:-[a-z]+)*$")


def _unquote(value: str) -> tuple[str, bool]:
    value = value.strip().rstrip(",;")
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
        return value[1:-1], True
    return value, False


def plausible(value: str, judge: str, quoted: bool = False) -> bool:
    """Whether `value` (what a rule captured) looks like a real secret under `judge`; `quoted` says the
    text around it quoted it (a rule may capture inside the quotes or with them).

    >>> [plausible(v, "assign") for v in ("${DB_PASSWORD}", "os.environ['X']", "true", "hunter2hunter2")]
    [False, False, False, True]
    >>> plausible("django.contrib.auth.hashers.Argon2PasswordHasher", "assign"), plausible("str", "assign")
    (False, False)
    >>> plausible("hunter2!", "prose"), plausible("incorrect", "prose"), plausible("sk-folding-cube", "token")
    (True, False, False)
    """
    text, had_quotes = _unquote(value)
    quoted = quoted or had_quotes
    if not text.strip() or _REFERENCE.search(text) or _PLACEHOLDER.search(text) or _FILLER.search(text):
        return False
    if judge == "flag":
        return True
    if judge == "token":
        return (any(c.isdigit() for c in text) and any(c.isalpha() for c in text)
                and not _HYPHEN_WORDS.match(text.split("-", 1)[-1]))
    if _SCALAR.match(text) or _CODE.search(text) or _PATH_OR_URL.match(text):
        return False
    if judge == "prose":
        return not text.isalpha() and shannon_entropy(text) > 1.5
    if not _IDENTIFIER.match(text):
        return True
    # "assign" and an identifier: a dotted name of three parts or more is a module path; quoted
    # UPPER_SNAKE is the name of an environment variable; unquoted, it is a variable in code
    # (`token = other.token`) unless it has a digit (`DB_PASS=hunter2`). Like gitleaks' own
    # allowlist, this lets a letters-only unquoted password through.
    if text.count(".") >= 2:
        return False
    if quoted:
        return not (text.isupper() and "_" in text)
    return "." not in text and len(text) >= 6 and any(c.isdigit() for c in text)
