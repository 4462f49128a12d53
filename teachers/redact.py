"""Secret redaction for prompts, before anything leaves the machine.

Two layers: our own patterns for the secrets agents meet most (provider keys, AWS, GitHub, Slack, PEM
blocks, `.env` lines), which replace the whole secret; then detect-secrets' maintained detectors, line
by line, for the long tail (JWTs, Stripe, Twilio, basic-auth URLs, `password = "..."`, ...).
Each secret becomes `[REDACTED:<kind>]`. Results are memoised per string: the states of one trace
repeat the same history, so each message is scanned once per run.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import lru_cache
from typing import Any

MARK = "[REDACTED:{}]"
# Fields that are structure, not content: ids and roles are never secrets and must stay intact.
_STRUCTURAL = frozenset({"role", "type", "id", "tool_call_id", "name"})
_LINE_PREFIX = r"(?:[ \t]*\d+(?:\t|→)[ \t]*)?"  # Claude Code's Read output numbers every line
_NEWLINE = r"(?:\r?\n|\\n)"                    # real, or escaped inside a JSON string read as text
_PEM_HEAD = r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
_ENV_NAME = (r"(?:[A-Za-z0-9]+[_.-])*(?:API_?KEY|KEY|SECRET|TOKEN|PASSWORD|PASSWD|PWD|PASS|PASSPHRASE|"
             r"CREDENTIALS?)(?:[_.-][A-Za-z0-9]+)*")

# (kind, pattern, group to replace). Order matters: whole PEM blocks before anything inside them.
PATTERNS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    # The body may only hold base64, PEM headers and line numbers: code that merely mentions both
    # marker lines (a PEM parser) must survive.
    ("private_key", re.compile(_PEM_HEAD + r"[A-Za-z0-9+/=\s:,.\\→-]*?"
                               r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"), 0),
    # A block cut by a budget marker has no END line: take the base64 lines that follow the header.
    ("private_key", re.compile(_PEM_HEAD + rf"(?:(?:{_NEWLINE}{_LINE_PREFIX})+"
                               r"(?:[A-Za-z0-9+/=]{16,}|(?:Proc-Type|DEK-Info|Comment):[^\n\\]*))+"), 0),
    ("anthropic_key", re.compile(r"(?<![\w-])sk-ant-[A-Za-z0-9_\-]{20,}"), 0),
    ("openai_key", re.compile(r"(?<![\w-])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), 0),
    ("aws_access_key", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}"
                                  r"(?![A-Z0-9])"), 0),
    ("aws_secret_key", re.compile(r"(?i)(?:aws_?secret_?access_?key|aws_?secret_?key|secretaccesskey)"
                                  r"[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"), 1),
    ("github_token", re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|"
                                r"github_pat_[A-Za-z0-9_]{22,255})"), 0),
    ("slack_token", re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}"), 0),
    ("env_secret", re.compile(rf"(?im)^{_LINE_PREFIX}(?:export[ \t]+)?{_ENV_NAME}[ \t]*=[ \t]*"
                              r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s#]+)"), 1),
)
# An `.env` value that is no secret: empty, a boolean or number, a `$VAR` reference, or code.
_NOT_A_VALUE = re.compile(r"""^["']?(?:|true|false|yes|no|on|off|none|null|nil|\d+(?:\.\d+)?)["']?$"""
                          r"|^[\"']?[$%]|[()\[\]{}]|\[REDACTED:", re.I)
# detect-secrets plugins left out: the entropy detectors flag every git SHA, lockfile hash and base64
# fixture in a repo (691 hits in one 200 kB source file, measured) and teachers need those verbatim;
# a public IP address is not a credential. Private keys are whole blocks above.
_SKIPPED_PLUGINS = frozenset({"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector",
                              "PrivateKeyDetector"})
_TOKEN_CHARS = re.compile(r"[\w-]")


def _kind(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")


@lru_cache(maxsize=1)
def _plugins() -> tuple[tuple[str, Any], ...]:
    # Imported here: detect-secrets loads every plugin module (0.15 s), which `import teachers` must not pay.
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    return tuple((_kind(cls.secret_type), cls()) for cls in get_mapping_from_secret_type_to_class().values()
                 if cls.__name__ not in _SKIPPED_PLUGINS)


@lru_cache(maxsize=1)
def _keyword_hint() -> re.Pattern[str]:
    # KeywordDetector is the slow one (60% of the scan); a line without its keywords cannot match it.
    from detect_secrets.plugins.keyword import DENYLIST_REGEX

    return re.compile(DENYLIST_REGEX, re.IGNORECASE)


def _own_patterns(text: str, counts: Counter[str]) -> str:
    for kind, pattern, group in PATTERNS:
        def replace(match: re.Match[str], kind: str = kind, group: int = group) -> str:
            value = match.group(group)
            if kind == "env_secret" and _NOT_A_VALUE.search(value):
                return match.group(0)
            counts[kind] += 1
            start, end = match.start(group) - match.start(), match.end(group) - match.start()
            return match.group(0)[:start] + MARK.format(kind) + match.group(0)[end:]

        text = pattern.sub(replace, text)
    return text


def _widen(line: str, start: int, end: int) -> tuple[int, int]:
    # Some detectors yield only a prefix (GitHubTokenDetector yields "ghp"): take the whole token.
    while start > 0 and _TOKEN_CHARS.match(line[start - 1]):
        start -= 1
    while end < len(line) and _TOKEN_CHARS.match(line[end]):
        end += 1
    return start, end


def _detect_secrets_line(line: str, counts: Counter[str]) -> str:
    for kind, plugin in _plugins():
        if kind == "secret_keyword" and not _keyword_hint().search(line):
            continue
        for value in set(plugin.analyze_string(line)):
            if len(value) < 4 or "[REDACTED:" in value:
                continue
            at = line.find(value)
            while at >= 0:
                start, end = _widen(line, at, at + len(value))
                mark = MARK.format(kind)
                line = line[:start] + mark + line[end:]
                counts[kind] += 1
                at = line.find(value, start + len(mark))
    return line


@lru_cache(maxsize=16384)
def _redact_cached(text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    counts: Counter[str] = Counter()
    text = _own_patterns(text, counts)
    lines = text.split("\n")
    # Under 8 characters no detector can match; skipping them halves the scan of source code.
    text = "\n".join(_detect_secrets_line(line, counts) if len(line) >= 8 else line for line in lines)
    return text, tuple(sorted(counts.items()))


def redact_text(text: str) -> tuple[str, Counter[str]]:
    """`text` with every secret found replaced by `[REDACTED:<kind>]`, and the count of each kind.

    >>> redact_text("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345\\nDEBUG=true")
    ('OPENAI_API_KEY=[REDACTED:openai_key]\\nDEBUG=true', Counter({'openai_key': 1}))
    """
    redacted, counts = _redact_cached(text)
    return redacted, Counter(dict(counts))


def _walk(value: Any, counts: Counter[str], key: str | None = None) -> Any:
    if isinstance(value, str):
        if key in _STRUCTURAL:
            return value
        if key == "arguments" and value.lstrip().startswith("{"):
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                found: Counter[str] = Counter()
                walked = _walk(parsed, found)
                counts.update(found)
                return json.dumps(walked, ensure_ascii=False) if found else value
        redacted, found = _redact_cached(value)
        counts.update(dict(found))
        return redacted
    if isinstance(value, dict):
        return {k: _walk(v, counts, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(item, counts) for item in value]
    return value


def redact_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Counter[str]]:
    """New messages with secrets redacted in every string (content, tool arguments, nested); input untouched.

    >>> msgs = [{"role": "tool", "tool_call_id": "c1", "content": "token: ghp_" + "a" * 36}]
    >>> redact_messages(msgs)
    ([{'role': 'tool', 'tool_call_id': 'c1', 'content': 'token: [REDACTED:github_token]'}], \
Counter({'github_token': 1}))
    """
    counts: Counter[str] = Counter()
    return _walk(messages, counts), counts
