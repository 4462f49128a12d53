"""The secret-detection rules, read from data: gitleaks' default config plus our own (configs/).

`configs/gitleaks.toml` is gitleaks' maintained rule set, unchanged; `configs/redact.toml` adds the forms
it misses (command-line passwords, auth headers, URL credentials, `.env`/YAML/prose passwords, lenient
provider keys) in the same schema, switches rules off and adds allowlist entries. Both are read the way
gitleaks reads them: RE2 regexes (gitleaks' own syntax, so no translation), lower-cased keywords that
must occur before a rule runs, a Shannon-entropy floor, `secretGroup`, allowlists (regexes on the secret,
the match or the line; stopwords), and the global allowlist. Rules bound to file paths run everywhere
(a message has no path); path-only rules are skipped.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections import Counter
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache
from typing import Any

from configs import config_path
from teachers import secret_prefilter


@dataclass(frozen=True)
class Allowlist:
    """A finding is allowed (not a secret) when a regex matches `target` or the secret holds a stopword.

    The regexes are joined into one and the stopwords form one RE2 set (gitleaks joins them and uses
    Aho-Corasick): generic-api-key alone has 1,400 stopwords."""

    target: str                      # "secret" | "match" | "line"
    regex: Any                       # the regexes joined with |, or None
    stopwords: Any                   # re2.Set over lower-cased stopwords, or None
    all_of: bool = False             # gitleaks' condition = "AND"

    def allows(self, secret: bytes, match: bytes, line: bytes) -> bool:
        text = {"match": match, "line": line}.get(self.target, secret)
        by_regex = self.regex is not None and self.regex.search(text) is not None
        by_word = self.stopwords is not None and bool(self.stopwords.Match(secret.lower()))
        if self.all_of:
            checks = ([by_regex] if self.regex is not None else []) + ([by_word] if self.stopwords else [])
            return bool(checks) and all(checks)
        return by_regex or by_word


@dataclass(frozen=True)
class Rule:
    id: str
    pattern: str                     # an RE2 regex (`regex`: compiled over UTF-8 bytes)
    secret_group: int = 0
    entropy: float = 0.0
    keywords: tuple[str, ...] = ()
    allowlists: tuple[Allowlist, ...] = ()
    generic: bool = False            # loses to a specific rule on the same span
    judge: str = ""                  # how the value must look like a secret (teachers.secret_values)
    whole_match: bool = False        # the secret group is a fragment: the whole match is the secret
    defers: bool = False             # yields to a service's own rule named in the match (defer_to_named)
    global_allow: bool = True        # gitleaks' global allowlist applies (not in skip_global_allowlist)

    @cached_property   # (a frozen dataclass keeps it: cached_property writes the instance's __dict__)
    def regex(self) -> Any:
        """Compiled on first use: most rules never run on a text (`RuleSet.scan`), and compiling all 245
        took half of building the rules, before any file was read."""
        return _compile(self.pattern)

    @cached_property
    def needles(self) -> tuple[bytes, ...]:
        """The keywords as the keyword set matches them: bytes of the lower-cased words."""
        return tuple(word.lower().encode() for word in self.keywords)


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    always: tuple[int, ...]          # rules without keywords
    keyword_set: Any                 # re2.Set over every keyword
    keyword_rules: tuple[tuple[int, ...], ...]   # keyword index -> rules it enables
    allowlists: tuple[Allowlist, ...]            # global
    services: dict[int, tuple[bytes, frozenset[str]]] = dataclasses.field(default_factory=dict)
    # ^ keyword index -> (the keyword, the ids of the specific rules it names): defer_to_named
    prefilter: Any = None            # teachers.secret_prefilter scan over the raw bytes, or None
    covered: frozenset[int] = frozenset()        # rules the prefilter speaks for

    def candidates(self, lowered: bytes, data: bytes | None = None) -> list[Rule]:
        """The rules whose keywords occur in `lowered` (one pass of an RE2 set), plus keyword-less ones;
        given the text itself, only those the prefilter says may match it (one more pass, for all)."""
        hits = self.keyword_set.Match(lowered) or ()
        if not hits and not self.always:
            return []
        chosen = set(self.always)
        for index in hits:
            chosen.update(self.keyword_rules[index])
        if self.prefilter is not None and data is not None:
            chosen -= self.covered - self.prefilter(data)
        return [self.rules[i] for i in sorted(chosen)]

    def scan(self, data: bytes) -> list[Rule]:
        """`candidates`, asking the prefilter first: a rule it covers runs only when its regex may match,
        and only then is its keyword looked for. On real sessions 3% of texts have a rule that may match
        while most hold a keyword (issue #39: 38,583 keyword hits against 1,419 rule hits in 28,699 texts),
        so the keywords are not part of the prefilter's scan: each would call back into Python."""
        if self.prefilter is None or len(self.covered) < len(self.rules):   # (a rule Hyperscan rejected)
            return self.candidates(data.lower(), data)
        hits = self.prefilter(data)
        if not hits:
            return []
        lowered = data.lower()   # as the keyword set sees the text: ASCII letters lower-cased
        return [rule for rule in (self.rules[i] for i in sorted(hits))
                if not rule.keywords or any(word in lowered for word in rule.needles)]


def shannon_entropy(data: str) -> float:
    """Bits per character, as gitleaks computes it (over characters, not bytes).

    >>> shannon_entropy("aaaa"), round(shannon_entropy("ab"), 2)
    (0.0, 1.0)
    """
    if not data:
        return 0.0
    size = len(data)
    return max(0.0, -sum(n / size * math.log2(n / size) for n in Counter(data).values()))


# RE2's default 8 MB budget is too small for the lazy DFA of gitleaks' generic-api-key (counted
# repeats under (?i)): it falls back to the NFA and runs 3x slower on real sessions (issue #29). The
# budget is a ceiling, not an allocation.
_MAX_MEM = 64 << 20


@cache  # our rules share gitleaks' allowlists: each is compiled once
def _compile(pattern: str) -> Any:
    import re2

    options = re2.Options()
    options.max_mem = _MAX_MEM
    return re2.compile(pattern.encode(), options)


@cache
def _word_set(words: tuple[str, ...]) -> Any:
    import re2

    found = re2.Set.SearchSet()
    for word in sorted({w.lower() for w in words}):
        found.Add(re2.escape(word).encode())
    found.Compile()
    return found


def _allowlists(entries: list[dict[str, Any]]) -> tuple[Allowlist, ...]:
    out = []
    for entry in entries:
        regexes, stopwords = entry.get("regexes", []), entry.get("stopwords", [])
        if not regexes and not stopwords:
            continue  # path- or commit-only: a message has neither
        all_of = entry.get("condition", "OR").upper() == "AND"
        if all_of and entry.get("paths"):
            continue  # would need a path to match
        regex = _compile("|".join(f"(?:{r})" for r in regexes)) if regexes else None
        out.append(Allowlist(entry.get("regexTarget", "secret"), regex,
                             _word_set(tuple(stopwords)) if stopwords else None, all_of))
    return tuple(out)


def _rule(raw: dict[str, Any], extra_allow: list[dict[str, Any]], generic: set[str],
          whole: frozenset[str] = frozenset(), defers: frozenset[str] = frozenset(),
          own_only: frozenset[str] = frozenset()) -> Rule:
    return Rule(whole_match=raw["id"] in whole, defers=raw["id"] in defers, id=raw["id"],
                global_allow=raw["id"] not in own_only,
                pattern=raw["regex"], secret_group=int(raw.get("secretGroup", 0)),
                entropy=float(raw.get("entropy", 0.0)),
                keywords=tuple(k.lower() for k in raw.get("keywords", [])),
                allowlists=_allowlists(list(raw.get("allowlists", [])) + extra_allow),
                generic=raw["id"] in generic or "generic" in raw["id"], judge=str(raw.get("judge", "")))


def _read(name: str) -> dict[str, Any]:
    with config_path(name).open("rb") as handle:
        return tomllib.load(handle)


def _build(raws: list[dict[str, Any]], extra: dict[str, list[dict[str, Any]]], generic: set[str],
           glob: list[dict[str, Any]], whole: frozenset[str] = frozenset(),
           defer: dict[str, Any] | None = None, own_only: frozenset[str] = frozenset()) -> RuleSet:
    defer = defer or {}
    rules = tuple(_rule(raw, extra.get(raw["id"], []), generic, whole, frozenset(defer.get("rules", [])),
                        own_only) for raw in raws)
    keywords = sorted({k for rule in rules for k in rule.keywords})
    keyword_set = _word_set(tuple(keywords))
    index = {word: i for i, word in enumerate(keywords)}
    enabled: list[list[int]] = [[] for _ in keywords]
    for i, rule in enumerate(rules):
        for word in rule.keywords:
            enabled[index[word]].append(i)
    plain = set(defer.get("not_a_service", []))
    services = {index[word]: (word.encode(), frozenset(rules[i].id for i in enabled[index[word]]
                                                       if not rules[i].generic and not rules[i].judge))
                for word in keywords if len(word) >= 4 and word not in plain and defer}
    return RuleSet(rules=rules, always=tuple(i for i, r in enumerate(rules) if not r.keywords),
                   keyword_set=keyword_set, keyword_rules=tuple(tuple(e) for e in enabled),
                   allowlists=_allowlists(glob), services={k: v for k, v in services.items() if v[1]})


@lru_cache(maxsize=1)
def rule_set() -> RuleSet:
    """Every rule, compiled once per process (~0.2 s)."""
    ours, theirs = _read("redact.toml"), _read("gitleaks.toml")
    disabled = set(ours.get("disabled", []))
    generic = set(ours.get("generic", []))
    extra: dict[str, list[dict[str, Any]]] = {}
    for entry in ours.get("allowlists", []):
        for rule_id in entry["rules"]:
            extra.setdefault(rule_id, []).append({k: v for k, v in entry.items() if k != "rules"})
    by_id = {r["id"]: r for r in theirs["rules"]}
    for source, targets in ours.get("inherit_allowlists", {}).items():
        for rule_id in targets:  # a rule of ours leaves alone what gitleaks' rule of the same kind allows
            extra.setdefault(rule_id, []).extend(by_id[source].get("allowlists", []))
    raws = [r for r in theirs["rules"] if r.get("regex") and r["id"] not in disabled] + ours["rules"]
    glob = [theirs.get("allowlist", {}), *theirs.get("allowlists", []), *ours.get("global_allowlists", [])]
    rules = _build(raws, extra, generic, glob, frozenset(ours.get("whole_match", [])),
                   ours.get("defer_to_named", {}), frozenset(ours.get("skip_global_allowlist", [])))
    built = secret_prefilter.build([raw["regex"].encode() for raw in raws])
    if built is None:
        return rules
    scan, covered = built
    return dataclasses.replace(rules, prefilter=scan, covered=covered)


@lru_cache(maxsize=1)
def gitleaks_rule_set() -> RuleSet:
    """gitleaks' default config alone, as gitleaks reads it (no rule of ours, nothing switched off):
    what `tests/gitleaks_cases.py` measures our rules against."""
    theirs = _read("gitleaks.toml")
    raws = [r for r in theirs["rules"] if r.get("regex")]
    return _build(raws, {}, set(), [theirs.get("allowlist", {}), *theirs.get("allowlists", [])])
