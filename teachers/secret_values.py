"""Is this value a secret, or only next to a secret-sounding name? (the `judge` of configs/redact.toml)

A name is never a secret by itself: `DB_PASSWORD=${DB_PASSWORD}` holds a reference, `token: str` a type,
`password = get_password()` a call. Over-redaction corrupts training data, so each rule that keys on a
name says how strictly its value is judged.
"""

from __future__ import annotations

import json
import re
import string
from functools import lru_cache

from configs import config_path
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
    >>> plausible("awBkduvZiPXC", "password"), plausible("incorrect", "password")
    (True, False)
    >>> plausible("sk-folding-cube", "token"), plausible("sk4x9Qm2", "token")
    (False, True)
    """
    if judge == "connection":
        return not stands_for(value)
    if judge == "password":
        return password_like(value)
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


# Judge "password": the value after a password keyword in prose (`the password for prod is X so…`).
# Letters-only passwords have no digit or symbol to tell them from words, so the test there is the
# other way round: a letter string is prose when English (configs/english_words.json) spells it, as one
# word or several run together (`incorrect`, `hashedPassword`), and a password otherwise.
_EDGES = "([{<\"'`)]}>.,;:!?"                 # quotes, brackets and the sentence's punctuation around it
_VARIABLE = re.compile(r"^(?:\$\{?[A-Za-z_]\w*\}?|<[\w -]*>?|\[[\w -]*\]?)$")  # $HOME, <your, [optional]
_VERSION = re.compile(r"^[~^<>=!v]*\d+(?:\.[\dx*]+)+(?:[-+][\w.]+)?$", re.I)
_PATH = re.compile(r"^(?:~?/|\.\.?/)[\w.@~+-]*(?:/[\w.@~+-]*)*$|^[a-z][a-z0-9+.-]*://")
_CODE_IN_PROSE = re.compile(r"os\.environ|process\.env|getenv|^--?[A-Za-z][\w-]*$")  # --gecos: a flag
_CODE_NAME = re.compile(r"\.([A-Za-z_]\w{2,})\(|\{([A-Za-z_][\w.]*)(?:![rsa])?(?::[^}]*)?\}")  # .join( {pw!r}
_MARKUP = re.compile(r"&(?:#x?[0-9a-fA-F]{1,6}|[a-z]{2,8});|<[A-Za-z][\w-]*>|</[A-Za-z][\w-]*>?|\\[nrt]")
# ^ `&quot;`, `<p>`, `</p`, `\n`: markup and escapes around the value, not its letters
_NAMED_VARIABLE = re.compile(r"(?:^|[\"'`(=])\$\{?([A-Za-z_]{4,})(?![A-Za-z0-9])")  # `$password'`
_CALL = re.compile(r"^([A-Za-z_][\w.]*)[(\[]")  # get_password(), os.environ[...]
_NAME_CASE = re.compile(r"[A-Z]+|[A-Z]?[a-z]+(?:[A-Z][a-z]+)*")  # LED, getcwd, Field, hashedPassword
_SEGMENT = 24                                   # the longest word tried when splitting a run of letters


@lru_cache(maxsize=1)
def _words() -> tuple[frozenset[str], frozenset[str]]:
    """(words, technical words with digits) from configs/english_words.json."""
    data = json.loads(config_path("english_words.json").read_text(encoding="utf-8"))
    words = {w for line in data["words"] for w in line.split()} | set(data["short"]) | set(data["technical"])
    return frozenset(words), frozenset(data["technical_with_digits"])


@lru_cache(maxsize=4096)
def spelled(letters: str) -> bool:
    """Whether a run of letters is English words run together (case ignored).

    >>> spelled("incorrect"), spelled("hashedPassword"), spelled("getpass"), spelled("awBkduvZiPXC")
    (True, True, True, False)
    """
    words, _ = _words()
    text = letters.lower()
    ends = [True] + [False] * len(text)   # ends[i]: text[:i] splits into words
    for i in range(1, len(text) + 1):
        ends[i] = any(ends[j] and text[j:i] in words for j in range(max(0, i - _SEGMENT), i))
    return ends[-1]


def _wordy(text: str) -> bool:
    """Words, names and punctuation only: `required")`, `(Optional[str]):`, `sha256-hashed`, `utf-8`."""
    words, named = _words()
    runs = re.findall(r"[A-Za-z0-9]+", _MARKUP.sub(" ", text))
    return bool(runs) and all((r.isalpha() and spelled(r) and (len(r) >= 3 or r.lower() in words))
                              or r.lower() in named for r in runs)


def _named(parts: list[str]) -> bool:
    """A name in code: each part cased as names are, and no part both long and unspelled."""
    return all(_NAME_CASE.fullmatch(p) and (len(p) <= 4 or p.isupper() or spelled(p)) for p in parts)


def password_like(value: str) -> bool:
    """Whether the word after a password keyword in prose is a password (judge "password").

    >>> [password_like(v) for v in ("awBkduvZiPXC", "hunter2!", '"pa"ss7w"', "Xq7!pLm2#v.", "48213")]
    [True, True, True, True, True]
    >>> [password_like(v) for v in ("incorrect", "required.", "string", "<your", "${PASSWORD}", "/home/x",
    ...                             "$DB_PASSWORD", "hashedPassword", "sha256", "^1.2.3", "getpass()")]
    [False, False, False, False, False, False, False, False, False, False, False]
    """
    text = value.strip()
    core = text.strip(_EDGES)
    if (len(core) < 4 or _VARIABLE.match(text) or _VARIABLE.match(core) or stands_for(text)
            or (_PLACEHOLDER.search(core) and re.fullmatch(r"[A-Za-z]+(?:[-_ .][A-Za-z]+)*", core))
            or _FILLER.search(core) or _ALPHABET_RUN.search(core) or len(_RUN.sub("", core)) < 4
            or _PATH.match(core) or _VERSION.match(core) or _CODE_IN_PROSE.search(text)
            or (_SCALAR.match(core) and not core.isdigit())):
        return False
    if core.isdigit():
        return len(core) >= 4          # a PIN; a port or a pin's number is shorter
    names = [a or b for a, b in _CODE_NAME.findall(text)] + _NAMED_VARIABLE.findall(text)
    if _wordy(text) or any(len(n) >= 3 and spelled(n) and _named(re.findall(r"[^._]+", n)) for n in names):
        return False
    call = _CALL.match(core)  # a call or subscript of a name of words (`ENC[…]`, `os.getcwd(`)
    parts = [p for p in re.split(r"[._]+", call.group(1)) if p] if call else []
    if parts and _named(parts) and any(len(p) >= 3 and spelled(p) for p in parts):
        return False
    if re.fullmatch(r"[A-Za-z]+(?:[-_.][A-Za-z]+)*", core):  # letters: a word, or a name (DB_PASS, a.b)
        return len(core) >= 6 if core.isalpha() else not _named(re.split(r"[-_.]", core))
    return shannon_entropy(core) > 1.5
