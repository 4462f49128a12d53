"""Keys never leak through an error or a log line.

Every key the process knows — the teacher spec's own, `REPLAY_ENDPOINT_API_KEY`, and every environment
variable named like a credential (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, ...) — is replaced
in any text before it is stored or printed, in the forms a server echoes it (as is, JSON-escaped,
percent-encoded, base64 of `user:key` basic auth being covered by the rules), then the text goes through
the redaction rules too (`teachers.client.describe_error` is what a failed call stores in
`Proposal.error`); `install_log_scrubbing` puts the same filter on litellm's log handlers and the
root logger's.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from teachers.redact import redact_text
from teachers.registry import SECRET_PARAM, TeacherSpec

KEY_MARK = "[REDACTED:api_key]"
_KEY_NAME = re.compile(r"(?i)(?:API_?KEY|TOKEN|SECRET|SECRET_ACCESS_KEY|ACCESS_KEY|PASSWORD|PASSWD|"
                       r"CREDENTIALS?|AUTH|PRIVATE_KEY)$|^REPLAY_(?:ENDPOINT_API|REDACT)_KEY$")
_MIN_KEY = 8  # shorter values ("1", "true") are settings, and would scrub half of every message


def _secret_values(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _secret_values(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _secret_values(item)


def known_keys(spec: TeacherSpec | None = None) -> list[str]:
    """Every credential this process could send: the environment's and the spec's, longest first.

    >>> "sk-demo-0123456789" in known_keys(TeacherSpec(name="a", model="m", api_key="sk-demo-0123456789"))
    True
    """
    found = {value for name, value in os.environ.items() if _KEY_NAME.search(name)}
    if spec is not None:
        if spec.api_key is not None:
            found.add(spec.api_key.get_secret_value())
        found.update(v for k, p in spec.params.items() if SECRET_PARAM.search(k) for v in _secret_values(p))
    return sorted((k for k in found if len(k) >= _MIN_KEY), key=len, reverse=True)


def scrub(text: str, spec: TeacherSpec | None = None) -> str:
    """`text` without any known key (raw, JSON-escaped or percent-encoded) and with secrets redacted.

    >>> spec = TeacherSpec(name="a", model="m", api_key="tok-9f8e7d6c5b4a")
    >>> scrub('401: invalid key "tok-9f8e7d6c5b4a"', spec)
    '401: invalid key "[REDACTED:api_key]"'
    """
    for key in known_keys(spec):
        for form in {key, json.dumps(key)[1:-1], quote(key, safe="")}:
            text = text.replace(form, KEY_MARK)
    return redact_text(text)[0]


class ScrubFilter(logging.Filter):
    """Rewrites every record a handler emits: message and traceback text scrubbed."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = scrub(record.getMessage()), None
        if record.exc_info:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


_FILTER = ScrubFilter()


def install_log_scrubbing(*loggers: str) -> None:
    """Put the scrubbing filter on every handler of these loggers and of the root logger (once each)."""
    for name in ("", *loggers):
        for handler in logging.getLogger(name or None).handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
