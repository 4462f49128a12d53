"""Pseudonymisation: personal data in a string → stable placeholders, a pure function of (text, settings).

Run once per state with the secret redaction (`teachers.redact_state`), after it, so every request and
every file under OUT holds the same placeholders, and the student's action and the teachers' answers
name the same user the same way (pairs never turn on a placeholder). Kinds (issue #50):

- `user_name`: the user of a home path (`/Users/alex/…`, `/home/alex`, `C:\\Users\\alex`, the encoded
  project folder `-Users-alex-…`) → `user-<tag>`; the run's user names (`Pseudonyms.names`, found in
  the sessions' recorded paths before reading) also as bare words in text (`alex wrote`), unless they
  are system accounts (`ubuntu`, `runner`: words of the text too);
- `email`: `alex@corp.com` → `email-<tag>@example.com` (addresses of no one kept: `noreply@…`,
  `git@github.com`, example domains);
- `host`: machine names that carry their owner's (`Alexs-MacBook-Pro`, `DESKTOP-4F2K9QZ`,
  `nas.local`) → `host-<tag>`;
- `ip_address`: public IPv4 addresses (private, loopback, reserved ones and the public resolvers are
  kept; `Version 3.2.6.1` is no address) → `ip-<tag>`;
- `phone`: international numbers (`+44 20 7946 0958`) → `phone-<tag>`.

The tag is the first 6 hex digits of HMAC-SHA256(key, kind + value), value lower-cased: the same name
is the same placeholder in every message, state, trace and run with the same key, and cannot be
checked against guessed names without the key (which never leaves the machine).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from configs import config_path
from teachers.hint_scan import Hint, HintScan, literal

PREFIX = "pii:"   # the kinds' prefix among a redactor's hits (secrets are counted by rule id)
# Each kind's placeholder ({tag}: the value's keyed hash). A value that already is one is left as it is.
_MARKS = {"user_name": "user-{tag}", "email": "email-{tag}@example.com", "person_name": "person-{tag}",
          "host": "host-{tag}", "ip_address": "ip-{tag}", "phone": "phone-{tag}"}
_PLACEHOLDER = re.compile(rf"^(?:{'|'.join(m.split('-')[0] for m in _MARKS.values())})-[0-9a-f]{{6}}$")

# Every pattern starts with a literal, so Python's regex engine skips to its candidates at C speed (a
# pattern opening with a look-behind or a character class crawls: 3 MB/s on real sessions); what must
# hold around a match is checked by the code that takes it (`_before_ok` and the kinds' functions).
# A home path's user: from `/home/` or `/Users/` (each its own pattern: a literal of six characters is
# found at C speed, a `/` and two words are not, in path-heavy tool output) up to a path's end.
_HOME_END = r"(?=$|[/\\\s\"'`:;,)\]}>|*$]|\.(?:$|\s))"
_HOME_NAME = rf"(?P<name>\w[\w.@-]*?){_HOME_END}"
_WIN_HOME = re.compile(r"Users(?:\\\\|\\|/)(?P<name>\w[\w. -]*?)(?=$|[/\\\"'`:;,)\]}>|*]|\.(?:$|\s))")
_DRIVE = re.compile(r"(?<![\w])[A-Za-z]:(?:\\\\|\\|/)$")
# WSL's /mnt/c/Users, file:///Users, \n/Users, a chroot's $ROOT/home/NAME, after a colour (ESC[0;36m)
# or a tab shown as ^I
_HOME_AFTER = re.compile(r"(?:/mnt/[a-z]|file://|\\[nt]|\$\{?\w+\}?|\x1b\[[\d;]*m|\^I)$")
_DOMAIN = re.compile(r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-]|\.[A-Za-z0-9])")
_LOCAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}$")
# The display name of an address (`Author: Logan Finney <lf@corp.io>`, `"Bo Li" <bo@x.org>`): one to four
# words between a field's start (a line, `: `, a quote, `, `) and the `<` right before the address.
_DISPLAY = re.compile(r"(?:^|\n|\\n|: |, |\"|\\\")"
                      r"(?P<name>[^\W\d_][\w.'’-]*(?: [^\W\d_][\w.'’-]*){0,3})\\?\"? <$")
_LAN_HOST = re.compile(r"\.(?:local|lan|home\.arpa)(?![\w-]|\.[A-Za-z0-9])")
# Machine names that carry their owner's (`Alexs-MacBook-Pro`) and Windows' own (`DESKTOP-4F2K9QZ`):
# one pattern per literal (an alternation of words starting differently is a slow scan in `re`).
_MACHINES = (re.compile(r"Mac(?:Book|book|-mini|mini|-Studio|-Pro)[\w-]*"),
             re.compile(r"DESKTOP-[A-Z0-9]{7}(?![\w-])"), re.compile(r"LAPTOP-[A-Z0-9]{7}(?![\w-])"))
_HOST_LEFT = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}$")
_OWNER_LEFT = re.compile(r"[\w'’]+-$")   # `Alexs-` of `Alexs-MacBook-Pro`
_IP_TAIL = re.compile(r"\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w-]|\.\d|/\d)")
_IP_HEAD = re.compile(r"(?<![\w.])\d{1,3}$")
_VERSION_BEFORE = re.compile(r"(?i)(?:version|ver|v|==|release|build|kernel)[\s:=]*\(?$")
_PHONE = re.compile(r"\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?)(?:[ .-]?\d{2,4}){2,4}(?![\w.])")

# What each kind needs in a text to match at all, found for all kinds and names in one pass over it
# (teachers.hint_scan): a kind runs its patterns only on a text holding one of its hints, most texts
# hold none. A hint is never narrower than what it gates (`\d` is any digit, but an address's are ASCII).
_HINTS = {
    "<email>": (rb"@[A-Za-z0-9][A-Za-z0-9.-]*\.[A-Za-z]{2}", "@"),   # _DOMAIN's own start and end
    "<ip>": (rb"[0-9]\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]", ""),         # IPv4Address takes ASCII digits only
    "<phone>": (rb"\+(?:[0-9]|[\x80-\xff])", "+"),                    # `+` and a digit, maybe not ASCII
    **{word: literal(word) for word in ("/Users/", "/home/", "Users\\", ":/Users/", "-Users-", "-home-",
                                        ".local", ".lan", ".home.arpa", "Mac", "DESKTOP-", "LAPTOP-")},
}
_LAN = (".local", ".lan", ".home.arpa")
# A name that starts and ends with a letter or digit (`_`, `.` and `-` only inside): two such names found
# at `_bare`'s boundaries never overlap, nor does one with the placeholder put in for another.
_WORDLIKE = re.compile(r"\w(?:[\w.-]*\w)?")
_HOME_HINTS = frozenset({"/Users/", "/home/", "Users\\", ":/Users/", "-Users-", "-home-"})
_HOST_HINTS = frozenset({*_LAN, "Mac", "DESKTOP-", "LAPTOP-"})


def _bounded(form: str) -> Hint:
    """A bare form's hint: the form where `_bare` may take it, between bytes that are no ASCII letter,
    digit or `_` (nor `.` before, `-` either side), or the text's ends. A byte of a character beyond
    ASCII passes (it may be a letter or not: never narrower). A name inside a word (`ken` of `token`,
    `base` of `database`) is then no hint, and its text goes unsearched (issue #55).

    >>> scan = HintScan({"ken": _bounded("ken")})
    >>> scan("a token"), scan("ken."), scan("(ken)"), scan("ken-1"), scan("\u00e9ken")
    (set(), {'ken'}, {'ken'}, set(), {'ken'})
    """
    pattern, word = literal(form)
    return rb"(?:^|[^0-9A-Za-z_.\-])" + pattern + rb"(?:$|[^0-9A-Za-z_\-])", word


@lru_cache(maxsize=1)
def _config() -> dict:
    return tomllib.loads(config_path("pseudonymise.toml").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _lists() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str], frozenset[str],
                      frozenset[str], frozenset[str]]:
    data = _config()
    users, emails = data["user_names"], data["emails"]
    return (frozenset(users["placeholders"]), frozenset(n.lower() for n in users["system_accounts"]),
            frozenset(emails["keep_domains"]), frozenset(emails["keep_local_parts"]),
            frozenset(emails["personal_domains"]), frozenset(emails["not_tlds"]),
            frozenset(data["ip_addresses"]["keep"]))


def _english() -> frozenset[str]:
    """Names that are also everyday words (configs/pseudonymise.toml `common_words`)."""
    return frozenset(_config()["user_names"]["common_words"])


def is_personal_name(name: str) -> bool:
    """Whether a home folder's name is a person's to pseudonymise (not a placeholder, not ours).

    >>> is_personal_name("alex"), is_personal_name("USER"), is_personal_name("user-0a1b2c")
    (True, False, False)
    """
    return (bool(name) and name not in _lists()[0] and not _PLACEHOLDER.match(name)
            and not name.startswith("$"))


def bare_names(names: Iterable[str]) -> tuple[str, ...]:
    """The user names also looked for as bare words: personal, not system accounts, long enough.

    >>> bare_names(["loganf", "ubuntu", "USER", "jo"])
    ('loganf',)
    """
    system, shortest = _lists()[1], _config()["user_names"]["min_bare_length"]
    return tuple(sorted({n for n in names if is_personal_name(n) and n.lower() not in system
                         and len(n) >= shortest}, key=lambda n: (-len(n), n)))


@dataclass(frozen=True, eq=False)   # hashed by identity: one object per run, a cheap memo key
class Pseudonyms:
    """A run's pseudonymisation settings: the key of the tags and the user names known up front."""

    key: bytes
    names: tuple[str, ...] = ()
    secrets: bool = True   # secrets are redacted too (off: --no-redact, names only)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", bare_names(self.names))
        english = _english()
        # A name that is also a word (`mark`, `will`) is only a name when written as one (`Mark`).
        # Literal forms in the cases a name is written in (found by str.find, see _bare).
        forms = sorted({form for n in self.names for form in (
            {n[:1].upper() + n[1:]} | ({n} if n != n.lower() else set()) if n.lower() in english
            else {n, n.lower(), n.upper(), n.capitalize()})},
            key=lambda f: (-len(f), f))
        object.__setattr__(self, "_bare_forms", tuple(forms))   # longest first: `alexis` before `alex`
        object.__setattr__(self, "_bare_set", frozenset(forms))
        # Each form as a pattern that replaces it in C (`_bare_only`): the literal first, so `re` skips
        # to it at C speed, then `_bare`'s boundaries as a look-behind and a look-ahead.
        object.__setattr__(self, "_bare_patterns", {form: re.compile(
            rf"{re.escape(form)}(?<![\w.-]{re.escape(form)})(?![\w-])") for form in forms})
        object.__setattr__(self, "_bare_words", all(_WORDLIKE.fullmatch(form) for form in forms))
        # The encoded project folder (`-Users-alex-proj`): a known name first (its `.`, `_`, `-` all
        # became `-`), else the next run of letters and digits.
        encoded = {re.sub(r"[^A-Za-z0-9]", "-", n): n for n in self.names}
        known = "".join(re.escape(e) + "(?![A-Za-z0-9])|" for e in sorted(encoded, key=len, reverse=True))
        object.__setattr__(self, "_from_encoded", encoded)
        object.__setattr__(self, "_encoded", re.compile(
            rf"-(?:Users|home)-(?P<name>{known}[A-Za-z0-9]+)"))
        # Home paths of users other than these forms (`_bare` finds theirs, the same span): a path of a
        # known user, most of them in real sessions, is then no match to look at.
        known = "".join(f"(?!{re.escape(form)}{_HOME_END})" for form in forms)
        object.__setattr__(self, "_home_patterns", tuple(
            (prefix, re.compile(f"{re.escape(prefix)}{known}{_HOME_NAME}"))
            for prefix in ("/home/", "/Users/")))
        object.__setattr__(self, "_scan", None)
        object.__setattr__(self, "_marks", {})   # (kind, value) -> (placeholder, hit): values recur

    def hints(self, text: str, data: bytes | None = None) -> set[str]:
        """The hints (`_HINTS`' keys, bare forms) in `text` (`data`: its UTF-8 bytes, if had), in one
        pass. (Compiled on first use, or by `prepare`: no work at import.)"""
        scan = self._scan or self.prepare()   # type: ignore[attr-defined]
        return scan(text, data)

    def prepare(self) -> HintScan:
        """The hints' scanner, compiled (or loaded) now: before worker processes fork, say."""
        if self._scan is None:   # type: ignore[attr-defined]
            forms = {form: _bounded(form) for form in self._bare_forms}   # type: ignore[attr-defined]
            object.__setattr__(self, "_scan", HintScan({**_HINTS, **forms}))
        return self._scan   # type: ignore[attr-defined]

    def __reduce__(self) -> tuple:
        # A worker process unpickles one object per settings (memo keys are by identity) and compiles
        # the names' patterns once.
        return shared_pseudonyms, (self.key, self.names, self.secrets)

    def tag(self, kind: str, value: str) -> str:
        return hmac.new(self.key, f"{kind}\0{value.lower()}".encode("utf-8", "surrogatepass"),
                        hashlib.sha256).hexdigest()[:6]


Found = tuple[tuple[str, str], ...]


def _hit(kind: str, value: str) -> tuple[str, str]:
    return PREFIX + kind, hashlib.sha256(value.lower().encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _keep_email(address: str) -> bool:
    _, _, keep_domains, keep_locals, personal, not_tlds, _ = _lists()
    local, _, domain = address.lower().rpartition("@")
    if domain.rpartition(".")[2] in not_tlds:
        return True
    if domain in personal or any(domain.endswith("." + d) for d in personal):
        return False
    return (local in keep_locals or domain in keep_domains
            or any(domain.endswith("." + d) for d in keep_domains) or _PLACEHOLDER.match(local) is not None)


def _public_ip(text: str, start: int, value: str) -> bool:
    return _global_address(value) and not _VERSION_BEFORE.search(text, max(0, start - 12), start)


@lru_cache(maxsize=4096)   # a session repeats its servers' addresses (one 3,200 times in a real corpus)
def _global_address(value: str) -> bool:
    try:
        address = ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return address.is_global and value not in _lists()[6]


Span = tuple[int, int, str]


def pseudonymise_found(text: str, settings: Pseudonyms, data: bytes | None = None) -> tuple[str, Found]:
    """(text with personal data replaced, ((kind, digest), ...)): `kind` is `pii:<kind>`, the digest
    tells values apart for counting and never leaves the process. `data`: the text's UTF-8 bytes, if had.

    >>> s = Pseudonyms(b"k", ("alex",))
    >>> pseudonymise_found("cd /Users/alex/src && mail alex@corp.io # alex", s)[0]
    'cd /Users/user-fb774f/src && mail email-07a0d2@example.com # user-fb774f'
    >>> pseudonymise_found("ssh 10.0.0.2; dig @8.8.8.8 x; ping 93.184.216.34", s)[0]
    'ssh 10.0.0.2; dig @8.8.8.8 x; ping ip-8acb69'
    """
    hints = settings.hints(text, data)
    if not hints:   # most texts
        return text, ()
    forms = hints & settings._bare_set   # type: ignore[attr-defined]
    spans = _spans(text, settings, hints - forms if forms else hints)
    found: list[tuple[str, str]] = []
    if forms and not spans and settings._bare_words:   # type: ignore[attr-defined]
        text = _bare_only(text, settings, forms, found)   # most texts with a hint on real sessions
    else:
        if forms:
            spans += _bare(text, settings, forms)
        if not spans:
            return text, ()
        text = _splice(text, spans, settings, found)
    # Each value once: the redactor counts distinct values per trace, and a path-heavy text names its
    # user hundreds of times (105,000 hits in 58,000 texts of a real corpus, issue #55).
    return text, tuple(dict.fromkeys(found))


def _spans(text: str, settings: Pseudonyms, hints: set[str]) -> list[tuple[int, int, str, str]]:
    """The spans of every kind but bare names whose hints (`hints`) are in `text`."""
    spans: list[tuple[int, int, str, str]] = []
    if not hints:
        return spans
    if "<email>" in hints:
        spans += _emails(text, settings)
    if not hints.isdisjoint(_HOME_HINTS):
        spans += _homes(text, settings, hints)
    if not hints.isdisjoint(_HOST_HINTS):
        spans += _hosts(text, settings, hints)
    if "<ip>" in hints:
        spans += _ips(text, settings)
    if "<phone>" in hints:
        spans += _phones(text, settings)
    return spans


def _bare_only(text: str, settings: Pseudonyms, forms: set[str], found: list[tuple[str, str]]) -> str:
    """`text` with its bare user names (`forms`: those its hints hold) replaced where nothing else is:
    what `_splice` makes of `_bare`'s spans, by one C substitution per form. In any order: names whose
    ends are letters or digits never overlap, nor does one with the placeholder put in for another
    (sorted only so the hits come in one order)."""
    for form in sorted(forms) if len(forms) > 1 else forms:
        mark = _mark(settings, "user_name", form)
        text, replaced = settings._bare_patterns[form].subn(mark[0], text)   # type: ignore[attr-defined]
        if replaced:
            found.append(mark[1])
    return text


def _mark(settings: Pseudonyms, kind: str, value: str) -> tuple[str, tuple[str, str]]:
    """(placeholder, hit) of a value, made once per settings: values recur."""
    mark = settings._marks.get((kind, value))   # type: ignore[attr-defined]
    if mark is None:
        mark = settings._marks[kind, value] = (   # type: ignore[attr-defined]
            _MARKS[kind].format(tag=settings.tag(kind, value)), _hit(kind, value))
    return mark


def _splice(text: str, spans: list[tuple[int, int, str, str]], settings: Pseudonyms,
            found: list[tuple[str, str]]) -> str:
    """`text` with each (start, end, kind, value) replaced by its placeholder, left to right; of
    overlapping candidates the one starting first, then the longest, stands (an address holding a
    bare name is the address's)."""
    out, last = [], 0
    for start, end, kind, value in sorted(spans, key=lambda s: (s[0], -s[1])):
        if start < last:
            continue
        mark = _mark(settings, kind, value)
        found.append(mark[1])
        out += [text[last:start], mark[0]]
        last = end
    out.append(text[last:])
    return "".join(out)


def _emails(text: str, settings: Pseudonyms) -> list[tuple[int, int, str, str]]:
    spans = []
    for match in _DOMAIN.finditer(text):
        at = match.start()
        local = _LOCAL.search(text, max(0, at - 64), at)
        if local is None:
            continue
        address = text[local.start():match.end()]
        if not _keep_email(address):
            spans.append((local.start(), match.end(), "email", address))
            if text[local.start() - 1:local.start()] == "<":
                spans += _display_name(text, local.start() - 1)
    return spans


def _display_name(text: str, bracket: int) -> list[tuple[int, int, str, str]]:
    """The person an address belongs to, named before it: the name of a personal address is personal too
    (git's `Author:` lines; an address kept, `Claude <noreply@anthropic.com>`, keeps its name)."""
    match = _DISPLAY.search(text, max(0, bracket - 80), bracket + 1)
    if match is None or not is_personal_name(match["name"]) or match["name"].endswith("[bot]"):
        return []
    return [(match.start("name"), match.end("name"), "person_name", match["name"])]


def _homes(text: str, settings: Pseudonyms, hints: set[str], known: frozenset[str] | set[str] = frozenset()
           ) -> list[tuple[int, int, str, str]]:
    """The user names of the home paths in `text`; with `known` (names found already), no span for a
    path of a known user (`home_names`: a session's head names its user in every line)."""
    spans = []
    for prefix, pattern in settings._home_patterns:   # type: ignore[attr-defined]
        for match in pattern.finditer(text) if prefix in hints else ():
            name = match["name"]
            if known and name in known:
                continue
            start = match.start()
            before = text[start - 1:start]
            if (before and (before.isalnum() or before in "_.-/\\")
                    and not _HOME_AFTER.search(text, max(0, start - 40), start)):
                continue
            if is_personal_name(name):
                spans.append((match.start("name"), match.end("name"), "user_name", name))
    for match in _WIN_HOME.finditer(text) if "Users\\" in hints or ":/Users/" in hints else ():
        drive = _DRIVE.search(text, max(0, match.start() - 6), match.start())
        if drive and is_personal_name(name := match["name"]):
            spans.append((match.start("name"), match.end("name"), "user_name", name))
    return spans + _encoded(text, settings, hints)


def _encoded(text: str, settings: Pseudonyms, hints: set[str]) -> list[tuple[int, int, str, str]]:
    """The user of an encoded project folder (`-Users-alex-proj`)."""
    spans = []
    if "-Users-" in hints or "-home-" in hints:
        for match in settings._encoded.finditer(text):   # type: ignore[attr-defined]
            before = text[match.start() - 1:match.start()]
            name = settings._from_encoded.get(match["name"], match["name"])   # type: ignore[attr-defined]
            if not (before.isalnum() or before == "_") and is_personal_name(name):
                spans.append((match.start("name"), match.end("name"), "user_name", name))
    return spans


def _bare(text: str, settings: Pseudonyms, forms: set[str]) -> list[tuple[int, int, str, str]]:
    spans = []
    for form in forms:   # (the order of the spans is `_splice`'s)
        # str.find, form by form: an alternation of words crawls in `re` (1.5 s against 0.4 s a corpus)
        at = text.find(form)
        while at >= 0:
            end = at + len(form)
            before, after = text[at - 1:at] if at else "", text[end:end + 1]
            inside = ((before and (before.isalnum() or before in "_.-"))
                      or (after and (after.isalnum() or after in "_-")))
            if not inside:
                spans.append((at, end, "user_name", form))
            at = text.find(form, end)
    return spans


def _hosts(text: str, settings: Pseudonyms, hints: set[str]) -> list[tuple[int, int, str, str]]:
    spans: list[tuple[int, int, str, str]] = []
    matches = list(_LAN_HOST.finditer(text)) if any(suffix in hints for suffix in _LAN) else []
    for hint, pattern in zip(("Mac", "DESKTOP-", "LAPTOP-"), _MACHINES, strict=True):
        if hint in hints:
            matches += pattern.finditer(text)
    for match in sorted(matches, key=lambda m: m.start()):
        start, value = match.start(), match.group()
        if value.startswith("."):   # nas.local: the name before the suffix
            left = _HOST_LEFT.search(text, max(0, start - 63), start)
            if left is None or text[left.start() - 1:left.start()] in (".", "/", "\\"):   # a file's name
                continue
            start = left.start()
        elif value.startswith("Mac"):   # Alexs-MacBook-Pro: the owner's part
            left = _OWNER_LEFT.search(text, max(0, start - 40), start)
            if left is None:
                continue
            start = left.start()
        spans.append((start, match.end(), "host", text[start:match.end()]))
    return spans


def _ips(text: str, settings: Pseudonyms) -> list[tuple[int, int, str, str]]:
    spans = []
    for match in _IP_TAIL.finditer(text):
        head = _IP_HEAD.search(text, max(0, match.start() - 3), match.start())
        if head is None:
            continue
        value = text[head.start():match.end()]
        if _public_ip(text, head.start(), value):
            spans.append((head.start(), match.end(), "ip_address", value))
    return spans


def _phones(text: str, settings: Pseudonyms) -> list[tuple[int, int, str, str]]:
    spans = []
    for match in _PHONE.finditer(text):
        before, value = text[match.start() - 1:match.start()], match.group()
        digits = sum(c.isdigit() for c in value)
        if (before and (before.isalnum() or before in "_+")) or not 10 <= digits <= 15:
            continue
        spans.append((match.start(), match.end(), "phone", "".join(c for c in value if c.isdigit())))
    return spans


def home_names(text: str, known: frozenset[str] | set[str] = frozenset()) -> set[str]:
    """The personal user names of the home paths in `text` (what `Pseudonyms.names` is made of), less
    those in `known`.

    >>> sorted(home_names('"cwd":"/Users/alex/x" /home/USER/y C:\\\\Users\\\\Bo Li\\\\z'))
    ['Bo Li', 'alex']
    """
    return {value for _, _, _, value in _homes(text, _NO_NAMES, _NO_NAMES.hints(text), known)}


_NO_NAMES = Pseudonyms(b"")


@lru_cache(maxsize=8)
def shared_pseudonyms(key: bytes, names: tuple[str, ...] = (), secrets: bool = True) -> Pseudonyms:
    """One `Pseudonyms` per settings in a process."""
    return Pseudonyms(key, names, secrets)
