"""Issue #47 item 1: a password written in prose (`the staging admin password is awBkduvZiPXC , use it`)
reaches no teacher and no output file, letters-only ones included, and prose that only talks about a
password stays as it is."""

from __future__ import annotations

import json
import random
import string
from collections import Counter
from pathlib import Path

import pytest

from replay.run import main
from teachers.redact import redact_text
from tests.llm_server import LLMServer
from tests.sessions import assistant, tool_result, tool_use, user, write_session
from tests.teacher_script import scripted

FORMS = (
    "the staging admin password is {p} , use it to log in",
    "password: {p}",
    "pw={p}",
    "the password for staging is {p}.",
    "the db password for prod is {p} so the migration can run",
    "passphrase {p}",
    'My password is "{p}"',
)
_ALPHABETS = (string.ascii_letters, string.ascii_letters + string.digits,
              string.ascii_letters + string.digits + string.punctuation)


def random_passwords(n: int = 200, seed: int = 4701) -> list[tuple[str, str]]:
    """(password, the prose that states it): letters only, letters with a digit, with a symbol in turn,
    8-24 characters, in each form of FORMS in turn."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        alphabet = _ALPHABETS[i % 3]
        while True:
            password = "".join(rng.choice(alphabet) for _ in range(rng.randint(8, 24)))
            if (i % 3 == 0 or (i % 3 == 1 and any(c.isdigit() for c in password))
                    or (i % 3 == 2 and any(c in string.punctuation for c in password))):
                break
        out.append((password, FORMS[i % len(FORMS)].format(p=password)))
    return out


@pytest.mark.parametrize(("text", "password"), [
    ("the staging admin password is awBkduvZiPXC , use it to log in", "awBkduvZiPXC"),
    ("pw=hunterQxkzvb", "hunterQxkzvb"),
    ("the password for staging is qGzRtbWmkLpe.", "qGzRtbWmkLpe"),
    ("the db password for prod is Tr0ub4dor&3 so connect with it", "Tr0ub4dor&3"),
    ("passphrase ZmXkqWvbTr", "ZmXkqWvbTr"),
    ('My password is "kQ"z!pX9v"', 'kQ"z!pX9v'),
    ("the password is hunter2!", "hunter2!"),
    ("I changed the password to XkcdWvbPqz yesterday", "XkcdWvbPqz"),
    ("my pin is 4821", "4821"),
    ("Password: sW(7]kq'Lp", "sW(7]kq'Lp"),
])
def test_a_password_in_prose_is_redacted_under_its_own_rule(text: str, password: str) -> None:
    redacted, found = redact_text(text)
    assert password not in redacted and found == Counter({"password-in-prose": 1})


@pytest.mark.parametrize("text", [
    "the password is incorrect",
    "password is required",
    "password: string",
    "password: <your password>",
    "pin is set",
    "pwd is /home/x",
    "the password is stored in $DB_PASSWORD",
    "password: ${PASSWORD}",
    "the passphrase is empty",
    "the password was changed yesterday",
    "the password must be at least 12 characters",
    "password reset link sent to the user",
    "password: hashedPassword",
    "password: SecretStr",
    "password: Optional[str] = None",
    "password = get_password()",
    "password=request.form['password']",
    "pwd = os.getcwd()",
    "password: process.env.DB_PASSWORD",
    "password: z.string().min(8),",
    "password is sha256-hashed before it is stored",
    "the password hashing uses argon2id",
    "pin: ^1.2.3",
    "pin = Pin(5, Pin.OUT)",
    "pin=LED_BUILTIN",
    "Password: ********",
    "password: xxxxxxxx",
    "password: null",
    'password: ""',
    "the password is the same as before",
    "passphrase protected keys need ssh-agent",
    "the password for the admin user is in the vault",
])
def test_prose_about_a_password_stays(text: str) -> None:
    assert redact_text(text) == (text, Counter())


def _session(folder: Path, lines: list[str]) -> Path:
    """The first 20 lines in the user's prompt, the rest in tool results of 20 lines each."""
    records = [user("u0", None, "set up the deploy.\n" + "\n".join(lines[:20]))]
    for n, start in enumerate(range(20, len(lines), 20), 1):
        call = tool_use(f"toolu_{n}", "cat notes")
        records.append(assistant(f"a{n}", records[-1]["uuid"], f"msg_{n}", call))
        records.append(user(f"r{n}", f"a{n}", tool_result(f"toolu_{n}", "\n".join(lines[start:start + 20]))))
    records.append(assistant("last", records[-1]["uuid"], "msg_last", tool_use("toolu_last", "make deploy")))
    return write_session(folder, records)


def test_200_random_prose_passwords_reach_no_teacher_and_no_file(tmp_path: Path) -> None:
    cases = random_passwords()
    session = _session(tmp_path / "p", [line for _, line in cases])
    out = tmp_path / "out"
    with LLMServer(scripted) as server:
        assert main(["--source", str(session), "--out", str(out), "--cache", str(tmp_path / "c.sqlite"),
                     "--teachers", f"ta=openai/ta@{server.url}"]) == 0
        sent = json.dumps(server.requests).encode()
    files = [p for p in out.rglob("*") if p.is_file()]
    assert server.requests and any(p.suffix == ".arrow" for p in files)

    def forms(password: str) -> set[bytes]:
        return {password.encode(), json.dumps(password)[1:-1].encode()}

    leaked = [p for p, _ in cases if any(f in sent for f in forms(p))]
    leaked += [p for p, _ in cases for path in files if any(f in path.read_bytes() for f in forms(p))]
    assert leaked == []
    redactions = json.loads((out / "report.json").read_text())["redactions"]
    # gitleaks' generic-api-key names a few long ones after `password:` first (the same span)
    assert sum(redactions.values()) >= len(cases) and redactions["password-in-prose"] >= 0.9 * len(cases)
