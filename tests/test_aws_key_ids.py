"""Issue #55 item 4: an AWS access key id named by its key (`aws_access_key_id = …`, `AWS_ACCESS_KEY_ID=…`)
or read from its credentials file reaches no teacher and no output file, whatever its entropy.

gitleaks' aws-access-token asks an id for more than 3.0 bits per character: 1 random id in 5,000 has
less (`AKIAAKOYUAJ5ZAAJJ7AU`: 2.90), and an id with a word of gitleaks' global allowlist in it
(`…FALSE…`, `…NULL`) is let through whatever its entropy. Ids are generated from a seeded RNG (no
key-shaped literal sits in the repository), most of them under that floor.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import re
import string
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from replay.ingest.redaction import redaction_key
from replay.run import main
from teachers.redact import redact_text
from teachers.secret_rules import shannon_entropy
from tests.llm_server import LLMServer
from tests.sessions import assistant, text, tool_result, user, write_session
from tests.teacher_script import scripted

BASE32 = string.ascii_uppercase + "234567"     # the 16 characters after an id's prefix
PREFIXES = ("AKIA", "AKIA", "AKIA", "ASIA", "ABIA", "ACCA", "A3TX")
SECRET = string.ascii_letters + string.digits + "+/"
PER_FILE = 25       # ids per credentials file (or env listing): 1,000 ids in 40 tool results
PER_SESSION = 10    # tool results per session: 4 sessions of 11 states each


def _tail(rng: random.Random, kind: int) -> str:
    if kind == 0:    # uniform, as AWS issues them
        return "".join(rng.choice(BASE32) for _ in range(16))
    if kind == 1:    # from 2 to 4 characters
        few = rng.sample(BASE32, rng.randint(2, 4))
        return "".join(rng.choice(few) for _ in range(16))
    if kind == 2:    # the prefix's letters and a few more, as AKIAAKOYUAJ5ZAAJJ7AU
        few = "AAAKKI" + "".join(rng.sample(BASE32, rng.randint(3, 6)))
        return "".join(rng.choice(few) for _ in range(16))
    if kind == 3:    # one character repeated, up to three changed
        tail = [rng.choice(BASE32)] * 16
        for _ in range(rng.randint(0, 3)):
            tail[rng.randrange(16)] = rng.choice(BASE32)
        return "".join(tail)
    word = rng.choice(("FALSE", "NULL"))   # a word of gitleaks' global allowlist, in a random id
    tail = "".join(rng.choice(BASE32) for _ in range(16 - len(word)))
    at = len(tail) if word == "NULL" else rng.randint(0, len(tail))
    return tail[:at] + word + tail[at:]


def random_key_ids(n: int = 1000, seed: int = 5504) -> list[str]:
    """`n` distinct AWS access key ids, five kinds in turn (`_tail`); none ends in EXAMPLE (AWS's
    documented sample ids, which gitleaks and we leave alone).

    >>> ids = random_key_ids(10)
    >>> len(set(ids)), all(len(i) == 20 and i[:4] in PREFIXES for i in ids)
    (10, True)
    """
    rng = random.Random(seed)
    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < n:
        key_id = rng.choice(PREFIXES) + _tail(rng, len(ids) % 5)
        if key_id not in seen and not key_id.endswith("EXAMPLE"):
            seen.add(key_id)
            ids.append(key_id)
    return ids


def _secret(rng: random.Random) -> str:
    return "".join(rng.choice(SECRET) for _ in range(40))


def _numbered(lines: list[str]) -> str:
    """A file as Claude Code's Read tool shows it."""
    return "\n".join(f"{n:>6}→{line}" for n, line in enumerate(lines, 1))


def _file(form: int, ids: list[str], secrets: list[str]) -> tuple[str, dict[str, Any], str]:
    """(tool, its input, its result) showing `ids` in one of four forms."""
    if form in (0, 1):   # ~/.aws/credentials: read, then cat
        eq = " = " if form == 0 else "="
        lines = []
        for n, (key_id, secret) in enumerate(zip(ids, secrets, strict=True)):
            lines += [f"[profile-{n}]" if n else "[default]", f"aws_access_key_id{eq}{key_id}",
                      f"aws_secret_access_key{eq}{secret}", "region = eu-west-1", ""]
        if form == 0:
            return "Read", {"file_path": "/home/dev/.aws/credentials"}, _numbered(lines)
        return "Bash", {"command": "cat ~/.aws/credentials"}, "\n".join(lines)
    if form == 2:        # the environment
        lines = [line for key_id, secret in zip(ids, secrets, strict=True)
                 for line in (f"AWS_ACCESS_KEY_ID={key_id}", f"AWS_SECRET_ACCESS_KEY={secret}",
                              "AWS_DEFAULT_REGION=us-east-1")]
        return "Bash", {"command": "env | grep AWS"}, "\n".join(lines)
    lines = ["#!/bin/sh"]
    for n, (key_id, secret) in enumerate(zip(ids, secrets, strict=True)):
        quote = '"' if n % 2 else ""     # an export line, quoted or not
        lines += [f"export AWS_ACCESS_KEY_ID={quote}{key_id}{quote}",
                  f"export AWS_SECRET_ACCESS_KEY={quote}{secret}{quote}"]
    return "Read", {"file_path": "/repo/deploy/env.sh"}, _numbered(lines)


def _sessions(folder: Path, ids: list[str], secrets: list[str]) -> None:
    chunks = [(ids[i:i + PER_FILE], secrets[i:i + PER_FILE]) for i in range(0, len(ids), PER_FILE)]
    for first in range(0, len(chunks), PER_SESSION):
        name = f"aws-{first // PER_SESSION}"
        records = [user("u0", None, "check which AWS profiles we have", sessionId=name)]
        for n, (these, their_secrets) in enumerate(chunks[first:first + PER_SESSION], 1):
            tool, args, shown = _file((first + n) % 4, these, their_secrets)
            call = {"type": "tool_use", "id": f"toolu_{n}", "name": tool, "input": args}
            records.append(assistant(f"a{n}", records[-1]["uuid"], f"msg_{name}_{n}", call, sessionId=name))
            records.append(user(f"r{n}", f"a{n}", tool_result(f"toolu_{n}", shown), sessionId=name))
        records.append(assistant("last", records[-1]["uuid"], f"msg_{name}_last", text("done"),
                                 sessionId=name))
        write_session(folder, records, name=name)


def test_the_generated_ids_are_mostly_under_gitleaks_entropy_floor() -> None:
    ids = random_key_ids()
    low = sum(shannon_entropy(key_id) <= 3.0 for key_id in ids)
    assert len(set(ids)) == 1000 and low >= 500


def test_1000_random_key_ids_reach_no_teacher_and_no_file(tmp_path: Path) -> None:
    ids = random_key_ids()
    rng = random.Random(5505)
    secrets = [_secret(rng) for _ in ids]
    _sessions(tmp_path / "sessions", ids, secrets)
    out = tmp_path / "out"
    with LLMServer(scripted) as server:
        assert main(["--source", str(tmp_path / "sessions"), "--out", str(out),
                     "--cache", str(tmp_path / "c.sqlite"), "--teachers", f"ta=openai/ta@{server.url}"]) == 0
        sent = json.dumps(server.requests)
    written = [p.read_bytes().decode("utf-8", "replace") for p in sorted(out.rglob("*")) if p.is_file()]
    report = json.loads((out / "report.json").read_text())
    # every id was sent, as its placeholder: 44 states (3 asked the same as another: a cache hit)
    assert report["states"] == 44 and len(server.requests) >= 40
    assert report["redactions"]["aws-access-key-id"] + report["redactions"]["aws-access-token"] == len(ids)
    key = redaction_key()   # the run's (in this test's cache folder): each id's placeholder was sent
    tags = set(re.findall(r"\[REDACTED:aws-access-(?:key-id|token):(\w+)\]", sent))
    assert not [i for i in ids if hmac.new(key, i.encode(), hashlib.sha256).hexdigest()[:6] not in tags]
    leaked = [key_id for key_id in ids if key_id in sent]
    in_files = [key_id for key_id in ids if any(key_id in text for text in written)]
    assert (len(leaked), leaked[:5]) == (0, [])
    assert (len(in_files), in_files[:5]) == (0, [])
    assert not [s for s in secrets if s in sent or any(s in text for text in written)]


@pytest.mark.parametrize("line", [
    "aws_access_key_id = {id}",
    "AWS_ACCESS_KEY_ID={id}",
    "export AWS_ACCESS_KEY_ID='{id}'",
    '$env:AWS_ACCESS_KEY_ID = "{id}"',
    "aws configure set aws_access_key_id {id}",
    "AWS Access Key ID [None]: {id}",
    '    "AccessKeyId": "{id}",',
    "s3 = boto3.client('s3', aws_access_key_id='{id}', region_name='eu-west-1')",
    "access_key = {id}",
    '  accessKeyId: "{id}",',
    "https://b.s3.amazonaws.com/k?AWSAccessKeyId={id}&Expires=1700000000&Signature=abc",
    "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={id}%2F20240101%2F",
    "User name,Password,Access key ID,Secret access key\nci,,{id},{secret}",
    "Access key ID,Secret access key\n{id},{secret}",
])
def test_a_named_key_id_is_redacted_whatever_its_entropy(line: str) -> None:
    key_id, secret = "AKIAAKOYUAJ5ZAAJJ7AU", "Zm9vYmFyYmF6cXV4" + "k3P/q+w9" * 3
    assert shannon_entropy(key_id) < 3.0
    redacted, found = redact_text(line.format(id=key_id, secret=secret))
    assert key_id not in redacted and secret not in redacted and found


@pytest.mark.parametrize("line", [
    "key = AKIAXXXXXXXXXXXXXXXX",                    # gitleaks' own false positives
    "aws_access_key: AKIAIOSFODNN7EXAMPLE",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",     # AWS's documented sample id
    "the aws_access_key_id field holds an id such as AKIA followed by 16 characters",
    "TODAYINASIAASACKOFRICEFELLOVER",
])
def test_what_names_no_key_id_stays(line: str) -> None:
    assert redact_text(line) == (line, Counter())
