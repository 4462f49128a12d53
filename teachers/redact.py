"""Secret redaction: one pure function of a string, applied to every string of a state before it is
written or sent.

Rules are data (`teachers.secret_rules`: gitleaks' default rules plus configs/redact.toml), matched with
RE2 over UTF-8 bytes; a rule runs only when one of its keywords occurs in the text (one RE2 set pass), as
in gitleaks. Three views of a text are scanned: the text itself; the text with JSON/`\\u`/`\\x` escapes
decoded (a PEM block inside a JSON string, a `\\u`-escaped token), mapped back to the original span;
and base64 runs that decode to text holding a secret (the whole run goes). A secret that ends a line
and continues on the next (a key wrapped by a terminal or an editor) takes the continuation with it.

Each secret becomes `[REDACTED:<rule>]`, or with a key `[REDACTED:<rule>:<tag>]`, the tag being the
first 6 hex digits of HMAC-SHA256(key, secret): the same secret gets the same placeholder in every
message, state, trace and run that uses the same key; two secrets get two; and the tag cannot be
checked against guessed passwords without the key, which never leaves the machine (`replay.pipeline`
keeps it in the user cache dir). A pure function of (text, key) is what lead decision C1 asks for:
every state of a trace carries the same redacted messages, so each request extends the previous one.
"""

from __future__ import annotations

import binascii
import bisect
import hashlib
import hmac
import json
import re
from collections import Counter
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from teachers.pseudonyms import Pseudonyms, pseudonymise_found
from teachers.secret_rules import Rule, rule_set, shannon_entropy
from teachers.secret_values import plausible

MARK = re.compile(r"\[REDACTED:[^\]\s]*\]")
# Fields that are structure, not content: ids and roles are never secrets (nor names: person_names,
# names_wide) and must stay intact.
STRUCTURAL = frozenset({"role", "type", "id", "tool_call_id", "name"})
# JSON / `\u` / `\x` escapes, and a shell's backslash before punctuation or a space (`\;`, `\&`, `\ `
# in an unquoted word: a connection string's password in a shell command, issue #34).
_ESCAPE = re.compile(r"""\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|([nrt"\\/' !#-.:-@\[\]^`{-~]))""")
# A quote inside a shell's single quotes (`'"'"'`, `'\''`, as shlex.quote writes it), a view of its
# own: between single quotes a backslash is no escape (`'p\rss'` is not `p<CR>ss`).
_SHELL_QUOTE = re.compile(r"""'(?:"'"|\\')'""")
# A quote doubled inside a string quoted with it (YAML's 'it''s', C#'s @"say ""hi"""), a view when a
# value opens with one (`Password=''…''`): a connection string's quoted password in a YAML or C# string.
_DOUBLED = re.compile(r"(?<!\\)(?:''|\"\")")  # not `\""`: an escaped quote, then the string's end
_SCALARS = frozenset({int, float, bool, type(None)})
_ENCODED = re.compile(rb"[0-9+/]")
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "/": "/", "'": "'"}
_URL_SAFE = bytes.maketrans(b"-_", b"+/")


_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
_RUN_CHARS = bytes(0x61 if i in _BASE64 else 0x20 for i in range(256))   # a run's bytes -> "a"
_RUN = b"a" * 24


def _base64_runs(data: bytes) -> Iterator[tuple[int, int]]:
    """The spans `[A-Za-z0-9+/_-]{24,}={0,2}` matches in `data`, left to right: each run of at least 24
    base64 characters with up to two `=` after it. Found by C string searches over a copy of `data`
    whose base64 characters are all `a` (twice as fast as a regex on real sessions, issue #39). The
    characters are ASCII, so a run in the UTF-8 bytes is the run in the text.

    >>> list(_base64_runs(b"x " + b"QUJD" * 6 + b"== " + b"z/" * 11 + b"z"))
    [(2, 28)]
    """
    runs = data.translate(_RUN_CHARS)
    start = runs.find(_RUN)
    while start >= 0:
        end = runs.find(b" ", start + 24)
        end = len(data) if end < 0 else end
        end += (data[end:end + 1] == b"=") + (data[end:end + 2] == b"==")
        yield start, end
        start = runs.find(_RUN, end)

_WRAP = re.compile(r"(?:\\?\r?\n|\\n)(?:[ \t]*\d+(?:\t|→))?[ \t]*([A-Za-z0-9_+/-]{6,}={0,2})"
                   r"(?=$|[\s\"'`]|\\n)")
_DEPTH = 2  # views of views: an escaped string inside an escaped string, base64 inside JSON

Span = tuple[int, int, Rule]


def _char_offsets(text: str, data: bytes, spans: list[tuple[int, int, Rule]]) -> list[Span]:
    if len(data) == len(text):  # ASCII: bytes are characters
        return spans
    return [(len(data[:s].decode("utf-8", "ignore")), len(data[:e].decode("utf-8", "ignore")), r)
            for s, e, r in spans]


def _first_group(match: Any, rule: Rule) -> int:
    if rule.whole_match:
        return 0
    if rule.secret_group:
        return rule.secret_group
    groups = match.groups()
    return next((i for i, g in enumerate(groups, 1) if g), 0)


def _direct(text: str, data: bytes, chosen: list[Rule]) -> list[Span]:
    """The findings of the `chosen` rules (those that may match `data`: `RuleSet.scan`)."""
    rules = rule_set()
    found: list[tuple[int, int, Rule]] = []
    deferring: list[tuple[int, int, Rule, int]] = []
    for rule in chosen:
        for match in rule.regex.finditer(data):
            group = _first_group(match, rule)
            start, end = match.span(group)
            secret_bytes = data[start:end].strip(b"\n")
            end = start + len(secret_bytes)
            secret = secret_bytes.decode("utf-8", "replace")
            if not secret or (rule.entropy and shannon_entropy(secret) <= rule.entropy):
                continue
            line_start = data.rfind(b"\n", 0, start) + 1
            line_end = data.find(b"\n", end)
            line = data[line_start:line_end if line_end >= 0 else len(data)]
            allowlists = (*rules.allowlists, *rule.allowlists) if rule.global_allow else rule.allowlists
            if any(a.allows(secret_bytes, match.group(0), line) for a in allowlists):
                continue
            quoted = start > 0 and data[start - 1:start] in (b'"', b"'", b"`")
            if rule.judge and not plausible(secret, rule.judge, quoted):
                continue
            if rule.defers:
                deferring.append((start, end, rule, match.start()))
            else:
                found.append((start, end, rule))
    if deferring:
        found += _undeferred(data, deferring, found, rules)
    return _char_offsets(text, data, found)


def _undeferred(data: bytes, deferring: list[tuple[int, int, Rule, int]], found: list[tuple[int, int, Rule]],
                rules: Any) -> list[tuple[int, int, Rule]]:
    """The findings of name-keyed rules whose name spells no service, or one whose own rule finds the
    same value (configs/redact.toml `defer_to_named`)."""
    lowered = data.lower()
    words = [rules.services[i] for i in rules.keyword_set.Match(lowered) or () if i in rules.services]
    if not words:
        return [(s, e, r) for s, e, r, _ in deferring]
    spans: dict[str, list[tuple[int, int]]] = {}
    for s, e, r in found:
        spans.setdefault(r.id, []).append((s, e))
    kept = []
    for start, end, rule, match_start in deferring:
        name = lowered[match_start:start]
        owners = {rule_id for word, ids in words if word in name for rule_id in ids}
        if not owners or any(s < end and start < e for o in owners for s, e in spans.get(o, ())):
            kept.append((start, end, rule))
    return kept


def _unescape(text: str, escape: re.Pattern[str] = _ESCAPE) -> tuple[str, list[tuple[int, int, int, int]]]:
    """The text with escapes decoded, and (decoded start, decoded length, original start, original end)
    of each escape."""
    out: list[str] = []
    pieces: list[tuple[int, int, int, int]] = []
    last = size = 0
    for match in escape.finditer(text):
        out.append(text[last:match.start()])
        size += match.start() - last
        code, byte, simple = match.groups() or (None, None, match.group()[0])  # a quote, undoubled
        char = chr(int(code or byte, 16)) if (code or byte) else _SIMPLE.get(simple, simple)
        pieces.append((size, len(char), match.start(), match.end()))
        out.append(char)
        size += len(char)
        last = match.end()
    out.append(text[last:])
    return "".join(out), pieces


def _to_original(pos: int, pieces: list[tuple[int, int, int, int]], starts: list[int], end: bool) -> int:
    # A start inside an escape's output maps to the escape's start; an (exclusive) end inside or at
    # the end of it maps to the escape's end; elsewhere the shift of the last escape before applies.
    index = (bisect.bisect_left(starts, pos) if end else bisect.bisect_right(starts, pos)) - 1
    if index < 0:
        return pos
    dec_start, dec_len, orig_start, orig_end = pieces[index]
    if pos < dec_start + dec_len or (end and pos == dec_start + dec_len):
        return orig_end if end else orig_start
    return orig_end + (pos - dec_start - dec_len)


@lru_cache(maxsize=4096)  # paths and ids recur across the texts of a session
def _decoded_base64(run: bytes) -> str | None:
    if _ENCODED.search(run) is None:
        return None  # an identifier or a word, not an encoding
    if b"-" in run or b"_" in run:
        run = run.translate(_URL_SAFE)
    try:  # binascii in strict mode validates in C what b64decode(validate=True) checks with a regex
        raw = binascii.a2b_base64(run + b"=" * (-len(run) % 4), strict_mode=True)
        text = raw.decode("utf-8")
    except ValueError:
        return None
    head = text[:4096]
    if head.isprintable():
        return text if len(text) >= 12 else None
    printable = sum(c.isprintable() or c in "\n\r\t" for c in head)
    return text if len(text) >= 12 and printable >= 0.95 * min(len(text), 4096) else None


def _find(text: str, depth: int, data: bytes | None = None) -> list[Span]:
    if data is None:
        data = text.encode("utf-8", "surrogatepass")
    chosen = rule_set().scan(data)   # most texts: no rule may match, and nothing more to do here
    spans = _direct(text, data, chosen) if chosen else []
    if depth <= 0:
        return spans
    views = [_ESCAPE] if "\\" in text else []
    if "'\"'\"'" in text or "'\\''" in text:
        views.append(_SHELL_QUOTE)
    if depth == _DEPTH and ("=''" in text or '=""' in text):  # in the text as written: a decoded `\""` is
        views.append(_DOUBLED)                                 # an escaped quote, then the string's end
    for escape in views:
        decoded, pieces = _unescape(text, escape)
        if pieces:
            starts = [p[0] for p in pieces]
            spans += [(_to_original(s, pieces, starts, False), _to_original(e, pieces, starts, True), r)
                      for s, e, r in _find(decoded, depth - 1)]
    # Base64 characters are ASCII, so a run in the UTF-8 bytes is the run in the text; byte offsets
    # become character offsets only for a run that hides a secret. Spans and slices, not the RE2
    # wrapper's groups: real sessions hold a hundred thousand runs (paths, ids).
    for start, end in _base64_runs(data):
        inner = _decoded_base64(data[start:end])
        hits = _find(inner, depth - 1) if inner else []
        if hits:
            spans += _char_offsets(text, data, [(start, end, min(hits, key=lambda h: h[2].generic)[2])])
    return spans


def _same_alphabet(secret: str, run: str) -> bool:
    classes = [str.isupper, str.islower, str.isdigit]
    symbols = {c for c in secret if not c.isalnum()}
    return all(c in symbols or any(f(c) and any(f(x) for x in secret) for f in classes)
               for c in run.rstrip("="))


def _extend_wrapped(text: str, spans: list[Span]) -> list[Span]:
    out = []
    for start, end, rule in spans:
        if end - start >= 16:
            for _ in range(3):  # a key wrapped over up to four lines
                tail = _WRAP.match(text, end)
                run = tail.group(1) if tail else ""
                # The continuation of a random key: a digit somewhere, and only characters the key uses.
                if not run or not any(c.isdigit() for c in run) or not _same_alphabet(text[start:end], run):
                    break
                end = tail.end(1)
        out.append((start, end, rule))
    return out


def _merge(spans: list[Span]) -> list[Span]:
    """Overlapping findings become one; a specific rule names it over a generic one, then the longest."""
    merged: list[list[Any]] = []
    for start, end, rule in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            group = merged[-1]
            group[1] = max(group[1], end)
            group[2].append((start, end, rule))
        else:
            merged.append([start, end, [(start, end, rule)]])
    return [(s, e, min(found, key=lambda f: (f[2].generic, -(f[1] - f[0])))[2]) for s, e, found in merged]


def _tag(secret: str, key: bytes) -> str:
    return hmac.new(key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:6]


# Repeats across traces are few (tool schemas, the system prompt); within a trace the redactor shares
# its copies (teachers.redact_state). Texts are large: 8,192 of them held 30 MB on real sessions.
@lru_cache(maxsize=1024)
def redact_found(text: str, key: bytes | None = None, pseudonyms: Pseudonyms | None = None
                 ) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(redacted text, ((rule, secret digest), ...)): the digest tells secrets apart for counting and
    never leaves the process. Memoised: the states of a trace repeat the same history. With
    `pseudonyms` (teachers.pseudonyms), personal data is replaced after the secrets (its hits are
    `pii:<kind>`), and secrets are left alone when `pseudonyms.secrets` is off (--no-redact)."""
    if pseudonyms is None:
        return _secrets_found(text, key)
    found: tuple[tuple[str, str], ...] = ()
    # One UTF-8 encoding for both passes (a tenth of pseudonymisation's time on real sessions, #55),
    # unless a secret was replaced in between.
    data: bytes | None = text.encode("utf-8", "surrogatepass")
    if pseudonyms.secrets:
        redacted, found = _secrets_found(text, key, data)
        if redacted is not text:
            text, data = redacted, None
    text, more = pseudonymise_found(text, pseudonyms, data)
    return text, found + more


def _secrets_found(text: str, key: bytes | None, data: bytes | None = None
                   ) -> tuple[str, tuple[tuple[str, str], ...]]:
    spans = _find(text, _DEPTH, data)
    if spans and "[REDACTED:" in text:  # already redacted text stays as it is (idempotent)
        marks = [m.span() for m in MARK.finditer(text)]
        spans = [s for s in spans if not any(a < s[1] and s[0] < b for a, b in marks)]
    if not spans:
        return text, ()
    out, found, last = [], [], 0
    for start, end, rule in _merge(_extend_wrapped(text, spans)):
        secret = text[start:end]
        mark = f"[REDACTED:{rule.id}:{_tag(secret, key)}]" if key else f"[REDACTED:{rule.id}]"
        out += [text[last:start], mark]
        found.append((rule.id, hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:16]))
        last = end
    out.append(text[last:])
    return "".join(out), tuple(found)


def redact_text(text: str, key: bytes | None = None) -> tuple[str, Counter[str]]:
    """`text` with every secret replaced by a placeholder, and the count of each kind (rule id).

    >>> redact_text("OPENAI_API_KEY=sk-proj-Qx8fK2mZp9Lr4Tw7Yc1Vb6Nd3Hs5Jg0a\\nDEBUG=true")
    ('OPENAI_API_KEY=[REDACTED:openai-key]\\nDEBUG=true', Counter({'openai-key': 1}))
    >>> redact_text("sort_key=lambda row: row[0]  # KEY_FILE=/etc/ssl/server.key")[1]
    Counter()
    >>> redact_text("pw sk-ant-api03-" + "k" * 40, key=b"k")[0]
    'pw [REDACTED:anthropic-key:ff0975]'
    """
    redacted, found = redact_found(text, key)
    return redacted, Counter(kind for kind, _ in found)


def redact_value(value: Any, key: bytes | None = None, field: str | None = None,
                 pseudonyms: Pseudonyms | None = None) -> tuple[Any, list[tuple[str, str]]]:
    """A copy of a JSON-like value with every string redacted (structural fields kept), and what was
    found. Tool-call `arguments` given as a JSON string are searched as an object, so a multi-line
    secret inside is multi-line text when it is searched; the input is never changed. `pseudonyms`:
    personal data too (`redact_found`)."""
    if isinstance(value, str):
        if field in STRUCTURAL:
            return value, []
        if field == "arguments" and value.lstrip().startswith("{"):
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                walked, found = redact_value(parsed, key, None, pseudonyms)
                return (json.dumps(walked, ensure_ascii=False) if found else value), found
        redacted, found_text = redact_found(value, key, pseudonyms)
        return redacted, list(found_text)
    # Sessions hold a million strings and numbers: a plain string or a number in a container is done
    # here, without a call of its own (a third of the redaction pass on real sessions, issue #29).
    found_all: list[tuple[str, str]] = []
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            kind = type(v)
            if kind is str and k != "arguments":
                if k in STRUCTURAL:
                    out[k] = v
                else:
                    out[k], found_text = redact_found(v, key, pseudonyms)
                    if found_text:
                        found_all += found_text
            elif kind in _SCALARS:
                out[k] = v
            else:
                out[k], found = redact_value(v, key, k, pseudonyms)
                found_all += found
        return out, found_all
    if isinstance(value, list):
        items = []
        for item in value:
            kind = type(item)
            if kind is str:
                redacted, found_text = redact_found(item, key, pseudonyms)
                found_all += found_text
            elif kind in _SCALARS:
                redacted = item
            else:
                redacted, found = redact_value(item, key, None, pseudonyms)
                found_all += found
            items.append(redacted)
        return items, found_all
    return value, []


def redact_messages(messages: list[dict[str, Any]], key: bytes | None = None
                    ) -> tuple[list[dict[str, Any]], Counter[str]]:
    """New messages with secrets redacted in every string (content, tool arguments, nested).

    >>> pat = "ghp_aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2z4c"
    >>> msgs = [{"role": "tool", "tool_call_id": "c1", "content": "use " + pat}]
    >>> redact_messages(msgs)
    ([{'role': 'tool', 'tool_call_id': 'c1', 'content': 'use [REDACTED:github-pat]'}], \
Counter({'github-pat': 1}))
    """
    redacted, found = redact_value(messages, key)
    return redacted, Counter(kind for kind, _ in found)
