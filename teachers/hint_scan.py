"""Which of many hints occur in a text, in one pass (pseudonymisation's gate, issue #55).

Pseudonymisation (teachers/pseudonyms.py) looks for several kinds of personal data and the run's user
names in every string of a session, and most strings hold none of them. An `in` test per hint is a scan
of the text per hint: 35 scans on a real corpus, most of the pass's time. Hyperscan (Vectorscan, as the
secret rules' prefilter in teachers/secret_prefilter.py) finds every hint in one scan of the text's UTF-8
bytes. A hint is a regular expression over those bytes that every match of what it gates contains
(`literal` for a word); without Hyperscan, or for a hint it rejects, the hint's fallback literal is looked
for with `in` (`""`: always there), which is never narrower either.
"""

from __future__ import annotations

from collections.abc import Mapping

from teachers.secret_prefilter import build

Hint = tuple[bytes, str]   # (a regex over UTF-8 bytes, the fallback literal)


def literal(word: str) -> Hint:
    """The hint of a word: its bytes, each escaped, and the word itself.

    >>> literal("a.b")
    (b'\\\\x61\\\\x2e\\\\x62', 'a.b')
    """
    return b"".join(b"\\x%02x" % byte for byte in word.encode("utf-8", "surrogatepass")), word


class HintScan:
    """`scan(text)`: the keys of the hints that occur in `text` (a superset where Hyperscan is missing).

    >>> scan = HintScan({"at": (rb"@[a-z]", "@"), "home": literal("/home/")})
    >>> sorted(scan("cd /home/x; mail a@b")), sorted(scan("@1")), scan("")
    (['at', 'home'], [], set())
    """

    def __init__(self, hints: Mapping[str, Hint]) -> None:
        keys = tuple(hints)
        # Compiled (tens of ms: the byte patterns beside the words) and kept in the user cache dir
        # like the secret rules' database, keyed by the patterns.
        built = build([hints[key][0] for key in keys])
        self._scan, covered = built if built is not None else (None, frozenset())
        self._keys = keys
        self._fallback = {key: hints[key][1] for i, key in enumerate(keys) if i not in covered}
        self._fallback_bytes = {key: word.encode("utf-8", "surrogatepass")
                                for key, word in self._fallback.items()}

    def __call__(self, text: str, data: bytes | None = None) -> set[str]:
        """`data`: the text's UTF-8 bytes where the caller has them already."""
        if not text:
            return set()
        found = self._scanned(text.encode("utf-8", "surrogatepass") if data is None else data)
        if self._fallback:
            for key, word in self._fallback.items():
                if word in text:
                    found.add(key)
        return found

    def _scanned(self, data: bytes) -> set[str]:
        """The keys of the hints Hyperscan finds in `data` (none without it)."""
        hits = self._scan(data) if self._scan is not None else None
        # (two texts in three of a real corpus hold none: no set made from them)
        return {self._keys[i] for i in hits} if hits else set()

    def in_bytes(self, data: bytes) -> set[str]:
        """The keys of the hints in `data`, UTF-8 bytes with no text beside them (a line of a file): the
        fallback literals are looked for as their bytes.

        >>> HintScan({"home": literal("/home/")}).in_bytes(b'{"cwd": "/home/x"}')
        {'home'}
        """
        found = self._scanned(data)
        for key, word in self._fallback_bytes.items():
            if word in data:
                found.add(key)
        return found
