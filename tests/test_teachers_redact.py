"""Secret redaction: the planted corpus is caught, look-alikes are left alone, placeholders are stable,
one pass per state keeps every state of a trace a prefix of the next. Speed is in bench/redact.py."""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from ingestion.schema import Action, ToolCall, TraceState
from teachers.redact import redact_messages, redact_text
from teachers.redact_state import StateRedactor
from tests.secret_corpus import BENIGN, SECRETS


def test_every_rule_compiles() -> None:
    """Rules compile on first use (most never run on a text): a packaged rule RE2 refuses fails here."""
    from teachers.secret_rules import rule_set

    rules = rule_set().rules
    assert len(rules) > 200 and all(rule.regex is not None for rule in rules)


def test_corpus_is_large_and_varied() -> None:
    assert len(SECRETS) >= 40 and len({s.kind for s in SECRETS}) >= 30 and len(BENIGN) >= 30
    assert {s.where for s in SECRETS} >= {"user", "tool_args", "tool_result", "write", "edit", "thinking",
                                          "action"}


@pytest.mark.parametrize("secret", SECRETS, ids=[s.kind for s in SECRETS])
def test_planted_secret_is_redacted(secret) -> None:
    redacted, counts = redact_text(secret.text)
    assert secret.needle not in redacted and sum(counts.values()) >= 1
    assert "[REDACTED:" in redacted


@pytest.mark.parametrize("text", BENIGN)
def test_look_alike_is_left_alone(text: str) -> None:
    assert redact_text(text) == (text, Counter())


@pytest.mark.parametrize(("text", "kept"), [
    ("sshpass -p 'S5hpQ9xLm2Wv7Kq' ssh deploy@host", "sshpass -p '[REDACTED:"),
    ('stripe.api_key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"', 'stripe.api_key = "[REDACTED:'),
    ('"{\\"db\\": {\\"password\\": \\"Tg8Kq2LmXw9Z\\"}}"', '\\"}}"'),
    ("REDIS_URL=redis://:r3disQ9xLm2Wv7Kq@cache:6379/0", "@cache:6379/0"),
])
def test_only_the_secret_goes(text: str, kept: str) -> None:
    assert kept in redact_text(text)[0]


def test_truncated_pem_block_is_redacted() -> None:
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n" \
           "QyNTUxOQAAACBHK9Z1nexampleexample\n[... 4000 characters cut ...]\nafter"
    redacted, counts = redact_text(text)
    assert "b3BlbnNzaC1rZXktdjE" not in redacted and "QyNTUxOQ" not in redacted
    assert redacted.endswith("[... 4000 characters cut ...]\nafter") and counts == {"private-key-cut": 1}


def test_placeholders_are_stable_and_keyed() -> None:
    a, b = "ghp_" + "Q8zR2lK9xW4tN7vB1mC5hD3fG6jS0yAp4E3u", "ghp_" + "Z1yX2wV3uT4sR5qP6oN7mL8kJ9iH0gF1eD2c"
    text = f"push {a}\nagain {a}\nother {b}"
    once, counts = redact_text(text, key=b"k1")
    tags = [line.split()[-1] for line in once.splitlines()]
    assert tags[0] == tags[1] != tags[2] and counts == {"github-pat": 3}
    assert redact_text(text, key=b"k1")[0] == once != redact_text(text, key=b"k2")[0]
    assert a not in once and b not in once and "k1" not in once


def test_messages_nested_are_redacted_and_input_untouched() -> None:
    pat = "ghp_" + "Q8zR2lK9xW4tN7vB1mC5hD3fG6jS0yAp4E3u"
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "my key is sk-ant-api03-" + "k9Zq" * 10}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "Bash", "arguments": {"command": f"export GITHUB_TOKEN={pat} && gh pr list",
                                          "env": {"nested": ["AKIAQ7KZ3M2XWPLN4RTY"]}}}}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "type": "function", "function": {
            "name": "Write", "arguments": '{"content": "API_TOKEN=ab12cd34ef56gh78"}'}}]},
    ]
    before = copy.deepcopy(messages)
    redacted, counts = redact_messages(messages)
    assert messages == before
    text = str(redacted)
    for secret in ("k9Zq", pat, "AKIAQ7KZ3M2XWPLN4RTY", "ab12cd34ef56gh78"):
        assert secret not in text
    assert sum(counts.values()) == 4
    call = redacted[1]["tool_calls"][0]
    assert call["id"] == "c1" and call["function"]["name"] == "Bash"
    assert redact_messages(redacted) == (redacted, Counter())  # idempotent


def test_large_prompt_keeps_code_and_finds_the_secret() -> None:
    line = "    result = compute_something(alpha, beta, gamma)  # an ordinary line of code {}\n"
    code = "".join(line.format(i) for i in range(10_000))
    redacted, counts = redact_text(code + "AWS_SECRET_ACCESS_KEY=" + "Q8zR2lK9xW4tN7vB1mC5" * 2)
    assert redacted.startswith(code) and sum(counts.values()) == 1 and "Q8zR2lK9" not in redacted


def _state(turn: int, messages: list[dict], action: Action, metadata: dict | None = None) -> TraceState:
    return TraceState(state_id=f"claude_code:t:{turn}", trace_id="t", turn=turn, source="claude_code",
                      messages=messages, student_action=action, metadata=metadata or {})


def test_one_pass_per_state_keeps_the_trace_a_prefix() -> None:
    key = "sk-" + "Q8zR2lK9xW4tN7vB1mC5hD3fG6jS0yAp4E3uT7wX"
    shared = [{"role": "system", "content": "sys"}, {"role": "user", "content": f"use {key}"}]
    call = ToolCall(id="c1", name="Bash", arguments={"command": f"OPENAI_API_KEY={key} python x.py"})
    first = _state(0, shared, Action(tool_calls=[call], thinking=f"the key {key} works"),
                   {"prompt_token_ids": [1, 2, 3], "logprobs": [-0.1]})
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    second = _state(1, [*shared, first.student_action.to_message(), result], Action(content="done"))
    redactor = StateRedactor(b"k")
    one, two = redactor(first), redactor(second)
    assert key not in one.model_dump_json() and key not in two.model_dump_json()
    assert two.messages[:2] == one.messages[:2] and two.messages[2] == one.student_action.to_message()
    assert one.metadata["prompt_token_ids"] is None and redactor.states_token_ids_dropped == 1
    assert redactor.counts == {"openai-key": 1}  # one distinct secret in the trace


# Issue #24: what gitleaks' own cases found (the full set runs in tests/test_gitleaks_cases.py).
_JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0."
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")


@pytest.mark.parametrize("operator", ["=", "=>", ":=", "<-", "::=", "?="])
def test_assignment_operators_keep_the_operator_and_drop_the_password(operator: str) -> None:
    redacted, _ = redact_text(f'password {operator} "hunter2!xQ9"')
    assert redacted.startswith(f'password {operator} "[REDACTED:') and "hunter2" not in redacted


def test_a_rule_whose_group_is_a_fragment_takes_the_whole_match() -> None:
    import base64

    encoded = base64.b64encode(_JWT.encode()).decode()
    redacted, counts = redact_text(f"token: {encoded}")
    assert encoded[12:] not in redacted and encoded[:4] not in redacted, redacted
    hook = ("https://contoso.webhook.office.com/webhookb2/9a8b7c6d-1e2f-3a4b-5c6d-7e8f9a0b1c2d@1a2b3c4d-5e6f-"
            "7a8b-9c0d-1e2f3a4b5c6d/IncomingWebhook/0f1e2d3c4b5a69788796a5b4c3d2e1f0/4d3c2b1a-6f5e-8b7a-0d9c-"
            "2f1e4b3a6d5c")
    redacted, counts = redact_text(f"curl -X POST {hook}")
    assert redacted == "curl -X POST [REDACTED:microsoft-teams-webhook]"


@pytest.mark.parametrize("text", [
    "aws_access_key: AKIAIOSFODNN7EXAMPLE",          # AWS's documented example key
    "  - secretKey: api-key",                          # a name, not a value
    "csrf-token=Mj2qykJO5rELyHgezQ69nzUX0i3OH67V7+V4eUrLfpuyOuxmiW9rhROG/Whikle15syazJOkrjJa3U2AbhIvUw==",
    'telegram_api_token = "0009:A5eljjx8b-reoisyzz3ugf70fifiy-s_12h"',  # telegram's own rule says no
    "sk-ant-api03-abc123xyz-456de-klMnopqrstuvwx-3456yza789bcde-1234fghijklmnopAA",  # made-up
    '   API_KEY="glc_111111111111111111111111111111111111111111="',
    '<div class="sk-folding-cube sk-folding-cube-rotate-angle-delay"></div>',
])
def test_gitleaks_false_positives_stay(text: str) -> None:
    assert redact_text(text) == (text, Counter())


def test_django_secret_key_with_parentheses_is_a_secret() -> None:
    key = "k#v&x!p(w@z^q*m%h_r+y=t-b)n$e^u!a(f-d&c=j*g)s@l#o%"
    assert redact_text(f"SECRET_KEY='{key}'")[0] == "SECRET_KEY='[REDACTED:env-assign]'"


def test_the_prefilter_changes_no_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """One Hyperscan pass per text only skips rules that cannot match (issue #29): same output."""
    import dataclasses
    import json
    from pathlib import Path

    from teachers import redact, secret_rules

    cases = json.loads((Path(__file__).parent / "data" / "gitleaks_cases.json").read_text())
    texts = [c["text"] for c in cases["tps"][::10] + cases["fps"]] + [s.text for s in SECRETS] + BENIGN
    rules = secret_rules.rule_set()
    assert rules.prefilter is not None and len(rules.covered) == len(rules.rules)
    filtered = [redact_text(t, key=b"k") for t in texts]
    monkeypatch.setattr(redact, "rule_set", lambda: dataclasses.replace(rules, prefilter=None))
    redact.redact_found.cache_clear()
    assert [redact_text(t, key=b"k") for t in texts] == filtered
    redact.redact_found.cache_clear()
    assert sum(1 for t in texts if rules.prefilter(t.encode())) < len(texts)  # it does skip


def test_a_rule_the_prefilter_lets_through_still_needs_its_keyword(tmp_path, monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    """The prefilter holds the rules' regexes only (issue #39); a rule whose regex may match still runs
    only where one of its keywords occurs (in any case, as gitleaks has it); a keyword alone runs
    nothing."""
    import dataclasses

    from teachers import secret_prefilter, secret_rules

    monkeypatch.setenv("REPLAY_PREFILTER_CACHE", str(tmp_path))
    raws = [{"id": "zebra-code", "regex": r"code-[0-9]{8}", "keywords": ["Zebra"]},
            {"id": "bare-code", "regex": r"bare-[0-9]{8}"}]
    plain = secret_rules._build(raws, {}, set(), [])
    built = secret_prefilter.build([raw["regex"].encode() for raw in raws])
    assert built is not None
    scan, covered = built
    rules = dataclasses.replace(plain, prefilter=scan, covered=covered)
    for text in (b"code-12345678", b"a ZEBRA: code-12345678 and bare-87654321", b"zebra, no code",
                 b"zebra code-1234", b"bare-87654321"):
        assert [r.id for r in rules.scan(text)] == [r.id for r in plain.candidates(text.lower())
                                                    if r.regex.search(text)], text
    both = b"a ZEBRA: code-12345678 and bare-87654321"
    assert [r.id for r in rules.scan(both)] == ["zebra-code", "bare-code"]
    assert rules.scan(b"code-12345678") == [] and rules.scan(b"zebra, no code") == []


def test_the_prefilter_database_is_compiled_once(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from teachers import secret_prefilter

    monkeypatch.setenv("REPLAY_PREFILTER_CACHE", str(tmp_path))
    patterns = [rb"(?i)api[_-]?key\s*=\s*(\w{8,})", rb"ghp_[A-Za-z0-9]{36}", rb"\bAKIA[A-Z0-9]{16}\b"]
    scan, covered = secret_prefilter.build(patterns)
    assert covered == {0, 1, 2} and len(list(tmp_path.iterdir())) == 1
    stamp = next(tmp_path.iterdir()).stat().st_mtime_ns
    scan_again, _ = secret_prefilter.build(patterns)
    assert next(tmp_path.iterdir()).stat().st_mtime_ns == stamp  # read back, not compiled again
    text = b"API_KEY = abcdefgh12 and AKIAABCDEFGHIJKLMNOP"
    assert scan(text) == scan_again(text) == {0, 2}
