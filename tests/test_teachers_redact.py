"""Secret redaction: what is caught, what is left alone, purity, speed."""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from teachers.redact import redact_messages, redact_text

PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq98x3DFexampleexampleexampleexample\n"
       "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4\n-----END RSA PRIVATE KEY-----")


@pytest.mark.parametrize(("text", "secret", "kind"), [
    ("OPENAI_API_KEY=sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789", "sk-proj-Abcdefghij", "openai_key"),
    ("key: sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345-AA", "sk-ant-api03", "anthropic_key"),
    ("curl -H 'Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz123456'", "sk-abcdefghij", "openai_key"),
    ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "aws_secret_key"),
    ("git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/x/y", "ghp_abcdef",
     "github_token"),
    ("GH=gho_abcdefghijklmnopqrstuvwxyz0123456789", "gho_abcdef", "github_token"),
    ("token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_11", "github_token"),
    ('slack = "xoxb-123456789012-123456789012-abcdefghijklmnopqrstuvwx"', "xoxb-1234", "slack_token"),
    (PEM, "MIIEpAIBAAKCAQEA7bq98x3DF", "private_key"),
    ("DATABASE_PASSWORD=correct-horse-battery", "correct-horse", "env_secret"),
    ("export STRIPE_SECRET_KEY='whsec_abcdef123456'", "whsec_abcdef", "env_secret"),
    ("     3→DB_PASS=hunter2hunter2", "hunter2hunter2", "env_secret"),
    ('{"password": "s3cr3t-passw0rd"}', "s3cr3t-passw0rd", "secret_keyword"),
    ('password = "s3cr3t-passw0rd"', "s3cr3t-passw0rd", "env_secret"),
    ("url = 'postgres://admin:pa55w0rdXYZ@db.example.com:5432/app'", "pa55w0rdXYZ", "basic_auth_credentials"),
    ("auth eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "eyJhbGciOiJIUzI1NiJ9", "json_web_token"),
    ("glpat-abcdefghijklmnopqrstu in ci", "glpat-abcdefghij", "gitlab_token"),
])
def test_secret_is_redacted(text: str, secret: str, kind: str) -> None:
    redacted, counts = redact_text(text)
    assert secret not in redacted
    assert f"[REDACTED:{kind}]" in redacted and counts[kind] >= 1


@pytest.mark.parametrize("text", [
    "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39",
    '"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxv=="',
    "TOKENIZERS_PARALLELISM=false",
    "MAX_TOKENS=4096",
    "DB_PASSWORD=${DB_PASSWORD}",
    'SECRET_KEY = os.environ["SECRET_KEY"]',
    "def get_api_key(config):\n    return config.api_key",
    "pip install scikit-learn sk-video",
    "server at 203.0.113.7 returned 500",
    "if line.startswith('-----BEGIN RSA PRIVATE KEY-----'):\n    pass\n"
    "assert x == '-----END RSA PRIVATE KEY-----'",
])
def test_ordinary_code_is_left_alone(text: str) -> None:
    assert redact_text(text) == (text, Counter())


def test_truncated_pem_block_is_redacted() -> None:
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n" \
           "QyNTUxOQAAACBHK9Z1nexampleexample\n[... 4000 characters cut ...]\nafter"
    redacted, counts = redact_text(text)
    assert "b3BlbnNzaC1rZXktdjE" not in redacted and "QyNTUxOQ" not in redacted
    assert redacted.endswith("[... 4000 characters cut ...]\nafter") and counts == {"private_key": 1}


def test_messages_nested_are_redacted_and_input_untouched() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "my key is sk-ant-" + "k" * 40}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "Bash", "arguments": {"command": "export GITHUB_TOKEN=ghp_" + "a" * 36 + " && gh pr list",
                                          "env": {"nested": ["AKIAIOSFODNN7EXAMPLE"]}}}}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "type": "function", "function": {
            "name": "Write", "arguments": '{"content": "API_TOKEN=abcdef123456"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": PEM},
    ]
    before = copy.deepcopy(messages)
    redacted, counts = redact_messages(messages)
    assert messages == before
    text = str(redacted)
    for secret in ("k" * 40, "ghp_", "AKIAIOSFODNN7EXAMPLE", "abcdef123456", "MIIEpAIBAAK"):
        assert secret not in text
    assert counts == {"anthropic_key": 1, "github_token": 1, "aws_access_key": 1, "env_secret": 1,
                      "private_key": 1}
    assert redacted[1]["tool_calls"][0]["id"] == "c1" and redacted[3]["tool_call_id"] == "c1"
    assert redact_messages(redacted) == (redacted, Counter())  # idempotent


def test_large_prompt_keeps_code_and_finds_the_secret() -> None:
    # How fast this is belongs to bench/redact.py; here only what it finds.
    line = "    result = compute_something(alpha, beta, gamma)  # an ordinary line of code {}\n"
    code = "".join(line.format(i) for i in range(10_000))
    redacted, counts = redact_text(code + "AWS_SECRET_ACCESS_KEY=" + "A" * 40)
    assert redacted.startswith(code)
    assert counts["aws_secret_key"] + counts["env_secret"] == 1 and "A" * 40 not in redacted
