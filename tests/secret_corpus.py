"""Planted secrets and benign look-alikes for the redaction tests (issue #13).

Secrets are generated from a seeded RNG in their real formats, so no key-shaped literal sits in the
repository; each has a kind, the text that must never appear again (`needle`), and where it is planted.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

_RNG = random.Random(1313)
B62 = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = B62 + "+/"


def _r(alphabet: str, n: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


@dataclass(frozen=True)
class Secret:
    kind: str
    needle: str       # must appear nowhere after redaction
    text: str         # the text planted (holds the needle, perhaps encoded)
    where: str        # user | tool_args | tool_result | write | edit | thinking | action | mcp


def _pem(label: str) -> tuple[str, str]:
    lines = [_r(B64, 64) for _ in range(6)]
    body = "\n".join(lines)
    return f"-----BEGIN {label}-----\n{body}\n{_r(B64, 20)}==\n-----END {label}-----", lines[2]


def _secrets() -> list[Secret]:
    s: list[Secret] = []

    def add(kind: str, needle: str, text: str, where: str) -> None:
        s.append(Secret(kind, needle, text, where))

    k = "sk-proj-" + _r(B62, 74) + "T3BlbkFJ" + _r(B62, 74)
    add("openai_project_key", k, f"here is my key {k} please use it", "user")
    k = "sk-" + _r(B62, 48)
    add("openai_legacy_key", k, f"OPENAI_API_KEY={k}", "tool_result")
    k = "sk-ant-api03-" + _r(B62 + "_-", 93) + "AA"
    add("anthropic_key", k, f"export ANTHROPIC_API_KEY={k} && python run.py", "tool_args")
    k = "sk-" + _r(HEX, 32)
    add("deepseek_key", k, f'DEEPSEEK = "{k}"\nclient = OpenAI(api_key=DEEPSEEK)\n', "write")
    k = "AKIA" + _r("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
    add("aws_access_key", k, f"AWS_ACCESS_KEY_ID={k}", "tool_result")
    k = _r(B64, 40)
    add("aws_secret_key", k, f"AWS_SECRET_ACCESS_KEY={k}", "tool_result")
    k = "FwoGZXIvYXdzE" + _r(B64, 300)
    add("aws_session_token", k, f"[default]\naws_session_token = {k}\nregion = us-east-1", "tool_result")
    k = "ghp_" + _r(B62, 36)
    add("github_pat", k, f"git push https://{k}@github.com/acme/app.git main", "tool_args")
    k = "github_pat_" + _r(B62, 22) + "_" + _r(B62, 59)
    add("github_fine_grained", k, f"use the token {k} for the API", "user")
    k = "glpat-" + _r(B62, 20)
    add("gitlab_pat", k, f"The CI uses {k} to clone; I should not print it.", "thinking")
    k = "xoxb-" + _r(string.digits, 12) + "-" + _r(string.digits, 13) + "-" + _r(B62, 24)
    add("slack_bot_token", k, f"SLACK_BOT_TOKEN={k}", "tool_result")
    upper = string.ascii_uppercase + string.digits
    k = f"https://hooks.slack.com/services/T{_r(upper, 10)}/B{_r(upper, 10)}/{_r(B62, 24)}"
    add("slack_webhook", k, f'WEBHOOK = "{k}"\n', "write")
    k = "sk_live_" + _r(B62, 32)
    add("stripe_live_key", k, f'stripe.api_key = "{k}"', "edit")
    k = "AIza" + _r(B62 + "_-", 35)
    add("google_api_key", k, f"const MAPS = '{k}';", "edit")
    pem, line = _pem("RSA PRIVATE KEY")
    add("rsa_private_key", line, pem, "tool_result")
    pem, line = _pem("OPENSSH PRIVATE KEY")
    add("openssh_private_key", line, pem, "write")
    pem, line = _pem("PRIVATE KEY")
    sa = json.dumps({"type": "service_account", "project_id": "acme", "private_key_id": _r(HEX, 40),
                     "private_key": pem + "\n", "client_email": "ci@acme.iam.gserviceaccount.com"})
    add("gcp_service_account_key", line, sa, "tool_result")
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    payload = base64.urlsafe_b64encode(json.dumps({"sub": _r(string.digits, 10), "name": "Ann"}).encode())
    k = f"{header}.{payload.decode().rstrip('=')}.{_r(B62 + '_-', 43)}"
    add("jwt", k, f"my session token is {k}", "user")
    k = "Pa5s" + _r(B62, 10)
    add("curl_user_password", k, f"curl -u deploy:{k} https://ci.acme.dev/api/jobs", "tool_args")
    k = "My5ql" + _r(B62, 9)
    add("mysql_password", k, f"mysql -u root -p{k} -h db.internal app < dump.sql", "tool_args")
    k = "D0ck" + _r(B62, 12)
    add("docker_login_password", k, f"docker login -u ci -p {k} registry.acme.dev", "tool_args")
    k = "S5hp" + _r(B62, 11)
    add("sshpass_password", k, f"sshpass -p '{k}' ssh deploy@10.0.0.5 'systemctl restart app'", "tool_args")
    k = _r(B62, 40)
    add("x_api_key_header", k, f'headers = {{"x-api-key": "{k}"}}\nrequests.get(URL, headers=headers)\n',
        "write")
    k = _r(B62 + "-._", 48)
    add("bearer_header", k, f"> GET /v1/me HTTP/1.1\n> Authorization: Bearer {k}\n< HTTP/1.1 200 OK",
        "tool_result")
    k = "r3dis" + _r(B62, 14)
    add("redis_url_password", k, f"REDIS_URL=redis://:{k}@cache.internal:6379/0", "tool_result")
    k = "pg" + _r(B62, 16)
    add("postgres_url_password", k, f"connect with postgresql://app:{k}@db.acme.dev:5432/prod", "user")
    k = "Yml" + _r(B62, 13) + "!"
    add("yaml_password", k, f"database:\n  user: app\n  password: {k}\n  host: db\n", "write")
    k = "Xq7!pLm2#v" + _r(B62, 4)
    add("prose_password", k, f"the admin password is {k} , log in and check", "user")
    k = _r(HEX, 32)
    add("sentry_dsn", k, f'sentry_sdk.init(dsn="https://{k}@o450123.ingest.sentry.io/5512345")', "write")
    k = "ghs_" + _r(B62, 36)
    escaped = "".join(f"\\u{ord(c):04x}" for c in k)
    add("unicode_escaped_token", k, f'{{"installation": 7, "token": "{escaped}"}}', "tool_result")
    k = "sk-" + _r(B62, 48)
    add("wrapped_key", k[30:], f"OPENAI_API_KEY={k[:30]}\n{k[30:]}\n", "tool_result")
    k = "sk-proj-" + _r(B62, 40)
    encoded = base64.b64encode(f"OPENAI_API_KEY={k}\n".encode()).decode()
    add("base64_env_file", k, f"echo {encoded} | base64 -d > .env", "tool_args")
    k = "npm_" + _r(B62, 36)
    add("npm_token", k, f"//registry.npmjs.org/:_authToken={k}", "tool_result")
    k = "hf_" + _r(string.ascii_letters, 34)
    add("huggingface_token", k, f"I will log in with {k} before pushing.", "thinking")
    k = "SG." + _r(B62 + "_-", 22) + "." + _r(B62 + "_-", 43)
    add("sendgrid_key", k, f"SENDGRID_API_KEY={k}", "tool_result")
    k = "pypi-AgEIcHlwaS5vcmc" + _r(B62 + "_-", 70)
    add("pypi_token", k, f"[pypi]\n  username = __token__\n  password = {k}\n", "write")
    k = _r(B64, 86) + "=="
    add("azure_storage_key", k, "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=" + k
        + ";EndpointSuffix=core.windows.net", "tool_result")
    k = "M0ng0" + _r(B62, 11)
    add("cli_password_flag", k, f"mongodump --username admin --password={k} --out /backup", "tool_args")
    k = "Winter2024!" + _r(B62, 3)
    add("dotenv_password", k, f"DB_USER=app\nDB_PASSWORD={k}\nDB_HOST=db", "tool_result")
    k = "SK" + _r(HEX, 32)
    add("twilio_api_key", k, f'TWILIO_KEY_SID = "{k}"\n', "write")
    k = "dop_v1_" + _r(HEX, 64)
    add("digitalocean_token", k, f"doctl auth init -t {k}", "tool_args")
    k = "shpat_" + _r(HEX, 32)
    add("shopify_token", k, f"the store token is {k}", "user")
    k = "dapi" + _r(HEX, 32)
    add("databricks_token", k, f"DATABRICKS_TOKEN={k}", "tool_result")
    k = "rk_live_" + _r(B62, 32)
    add("student_action_stripe_key", k, f"export STRIPE_KEY={k}", "action")
    k = "hvs." + _r(B62 + "_-", 90)
    add("vault_token", k, f"VAULT_TOKEN={k} vault kv get secret/app", "tool_args")
    k = "Tg" + _r(B62, 12)
    add("json_escaped_password", k, json.dumps(json.dumps({"db": {"password": k}})), "tool_result")
    # Issue #24's held-out misses: Django's get_random_secret_key() alphabet without its digits (the
    # parentheses read as code), and a Slack user token nested in an MCP tool call's arguments.
    k = _r(string.ascii_lowercase + "!@#$%^&*(-_=+)", 50)
    add("django_secret_key", k, f"DEBUG=True\nSECRET_KEY='{k}'\nALLOWED_HOSTS=localhost\n", "tool_result")
    k = f"xoxp-{_r(string.digits, 12)}-{_r(string.digits, 12)}-{_r(string.digits, 13)}-{_r(HEX, 32)}"
    add("slack_user_token_mcp", k, json.dumps({"channel": "C0123", "options": {"auth": {"token": k}}}), "mcp")
    return s


SECRETS = _secrets()

_PNG = ("iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAAKElEQVR42mNkYPhfz0AEYBxVSF+F/5+5MDAwMDCMKqSvQgYGBgYA"
        "Ak8EH6ZfYU0AAAAASUVORK5CYII=")

BENIGN = [
    '<div class="sk-folding-cube sk-folding-cube-rotate-angle-delay"></div>',
    'rows.sort(key=lambda r: r["ts"]); sort_key=lambda r: r["ts"]',
    "id = Column(Integer, primary_key=True)",
    'cache_key = f"user:{user_id}:profile"',
    "KEY_FILE=/etc/ssl/private/server.key",
    "TOKEN_URL=https://oauth2.googleapis.com/token",
    "SECRET_NAME=prod/payments/db-credentials",
    "PASSWORD_HASHER=django.contrib.auth.hashers.Argon2PasswordHasher",
    "API_KEY_HEADER=X-API-Key",
    '<div class="sk-folding-cube"><div class="sk-cube1 sk-cube"></div></div>',
    "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39",
    "image: python@sha256:9b8e4e2f1c0d3a7b6e5f4d3c2b1a09f8e7d6c5b4a3928171605f4e3d2c1b0a9f",
    "request 8f14e45f-ceea-467f-a0e6-4c2b1b8e9d3a failed",
    '"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUgl4fRXp'
    '+Kl4y1P1Q=="',
    f'<img src="data:image/png;base64,{_PNG}">',
    "MAX_TOKENS=4096",
    "TOKENIZERS_PARALLELISM=false",
    "DB_PASSWORD=${DB_PASSWORD}",
    'api_key = os.environ["OPENAI_API_KEY"]',
    'password = getpass.getpass("Password: ")',
    "token: Optional[str] = None",
    "docker run -p 8080:80 nginx",
    "ssh -p 2222 deploy@bastion.acme.dev",
    "mysql -u root -p",
    "git clone git@github.com:acme/app.git",
    "DATABASE_URL=postgres://localhost:5432/app",
    'curl -H "Authorization: Bearer ${TOKEN}" https://api.acme.dev/me',
    "pip install scikit-learn sk-video",
    "github.com/pkg/errors v0.9.1 h1:FEBLx1zS214owpjy7qsBeixbURkuhQAwrK5UwLGTwt4=",
    "password_reset_timeout = 3600",
    "max_key_length = 255",
    "AWS_REGION=us-east-1",
    "export GITHUB_TOKEN=$(gh auth token)",
    "TOKEN_EXPIRY_SECONDS=3600",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    '{"key": "ctrl+shift+p", "command": "workbench.action.showCommands"}',
    "password_field = forms.CharField(widget=forms.PasswordInput)",
    "def compute_gradient_accumulation_steps_for_batch(size): pass",
    "/home/ann/.cache/huggingface/hub/models--bert-base-uncased/snapshots/"
    "0a6aa9128b6194f4f3c4db429b6cb4891cdb421b/config.json",
    "color: #3f2a9c; mask: 0xdeadbeef;",
    '"@types/node": "^20.11.5"',
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ann@laptop",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n"
    "-----END PUBLIC KEY-----",
]
