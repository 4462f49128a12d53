"""Is this value a secret, or only next to a secret-sounding name? (the `judge` of configs/redact.toml)

A name is never a secret by itself: `DB_PASSWORD=${DB_PASSWORD}` holds a reference, `token: str` a type,
`password = get_password()` a call. Over-redaction corrupts training data, so each rule that keys on a
name says how strictly its value is judged.
"""

from __future__ import annotations

import re
import string

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


# A connection string's whole value that only names its secret: a reference that a shell, a template or
# a config system fills in, or a placeholder, whose name says it is one (`${DB_PASSWORD}`, `$PGPASSWORD`,
# `%DB_PWD%`, `{{ db_password }}`, `<your-password>`). Whole values only: in a connection string anything
# else is a credential, whatever its characters (`$A5CA79`, `{{x?}}}`, `<3abc>`).
_NAMES_IT = r"[\w.-]*(?i:pass|pwd|pw|secret|key|token|cred)[\w.-]*"
_STANDS_FOR = re.compile(rf"^(?:\$\{{[\w.:?=+-]*\}}|\${_NAMES_IT}|\$\(.*\)|%{_NAMES_IT}%|@{_NAMES_IT}@"
                         r"|\{\{[ \t]*[\w .|()'\"-]+[ \t]*\}\}|\$\{\{[^{}]*\}\}|\[REDACTED:.*"
                         r"|\*+|[xX]+|\.\.\.|…|<[\w .-]*(?i:pass|pwd|pw|secret|key|token|cred)[\w .-]*>"
                         r"|(?i:your[\w .-]*))$")


def stands_for(value: str) -> bool:
    """Whether a connection string's value only names its secret (judge "connection").

    >>> [stands_for(v) for v in ("${DB_PASSWORD}", "$DB_PASS", "<password>", "{{ pw }}", "{your_password}")]
    [True, True, True, True, True]
    >>> [stands_for(v) for v in ("$ecret9", "$A5CA79", "{{x?}}}", "p@ss;w0rd", "x9", "NotFalse#2024")]
    [False, False, False, False, False, False]
    """
    text = value.strip().strip("\\\"'`").strip()
    if _STANDS_FOR.match(text):
        return True
    if text[:1] == "{" and text[-1:] == "}":  # ODBC's {braces} quote the value, }} inside
        text = text[1:-1].replace("}}", "}").strip()
    return not text or _STANDS_FOR.match(text) is not None


_RUN = re.compile(r"(.)\1{5,}")
# six in a row, each the next code point after a letter: `z` is followed by `{`
_ALPHABET_RUN = re.compile("|".join([string.ascii_lowercase[i:i + 6] for i in range(21)] + [r"vwxyz\{"]),
                           re.I)


def made_up(text: str) -> bool:
    """A value someone typed as an example: six letters of the alphabet in order (`klmnopqrst`), or
    hardly anything once runs of one repeated character are taken out (`glc_1111…1=`). A random key
    has neither; gitleaks' authors list such values as false positives.

    >>> made_up("sk-ant-api03-abc123xyz-klMnopqrstuvwx-3456yza789"), made_up("glc_" + "1" * 40 + "=")
    (True, True)
    >>> made_up("sk-ant-api03-Qx8fK2mZp9Lr4Tw7Yc1Vb6Nd3"), made_up("AAAAAAAAAAAAAAAAAAAAAmtNM8TbUux7aty")
    (False, False)
    """
    if text.isascii():
        if _ALPHABET_RUN.search(text):
            return True
    else:
        lowered = text.lower()
        run = 1
        for a, b in zip(lowered, lowered[1:], strict=False):
            run = run + 1 if a.isalpha() and ord(b) == ord(a) + 1 else 1
            if run >= 6:
                return True
    return len(_RUN.sub("", text)) < 8


def _random(text: str) -> bool:
    classes = sum(any(f(c) for c in text) for f in (str.islower, str.isupper, str.isdigit))
    symbols = sum(not c.isalnum() for c in text)
    return (len(text) >= 16 and not any(c.isspace() for c in text) and shannon_entropy(text) >= 4.0
            and classes + (symbols >= 3) >= 2 and "://" not in text)


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
    >>> plausible("'k#v&x!p(w@z^q*m%h_r+y=t-b)n$e^u!a(f-d&c=j*g)s@l#o'", "assign")
    True
    >>> plausible("hunter2!", "prose"), plausible("incorrect", "prose"), plausible("sk-folding-cube", "token")
    (True, False, False)
    """
    if judge == "connection":
        return not stands_for(value)
    text, had_quotes = _unquote(value)
    quoted = quoted or had_quotes
    if (not text.strip() or _REFERENCE.search(text) or _PLACEHOLDER.search(text) or _FILLER.search(text)
            or made_up(text)):
        return False
    if judge == "flag":
        return True
    if judge == "token":
        return (any(c.isdigit() for c in text) and any(c.isalpha() for c in text)
                and not _HYPHEN_WORDS.match(text.split("-", 1)[-1]))
    if quoted and _random(text):
        return True  # a quoted run of 16+ mixed characters, no space: Django's SECRET_KEY has `(` and `)`
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
