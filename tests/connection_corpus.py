"""Connection strings with random credentials, in the forms a session holds them (issue #34).

Each kind draws its credential from its real alphabet and length (an Azure storage key is 64 random
bytes in base64, a Service Bus key 32; a password is 8-32 printable ASCII characters, spaces and
symbols included) and writes it the way its driver reads it: ADO.NET quotes a value holding `;`, a
quote, `=` or a space ("" inside "…"), ODBC and mssql-jdbc brace it ({…}, }} inside), a URL
percent-encodes what RFC 3986 does not allow in a query. Each form then puts the whole string where a
session has it: prose, a JSON file (escaped quotes), JSON inside a JSON log line, a `.env` line, a shell
command (single-quoted, double-quoted, unquoted with backslashes), C# source in a Write, YAML in an
Edit. A `Case` knows where the credential sits in the final text (`before` + `secret` + `after`), so a
test can tell the credential, or any piece of it, from the text around it.
"""

from __future__ import annotations

import base64
import json
import random
import re
import shlex
import string
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

PRINTABLE = "".join(chr(c) for c in range(0x20, 0x7F))  # the 95 printable ASCII characters, space included
_MARK = "QZXSECRETMARKQZX"  # no form escapes a letter: the credential's place in a form's text
_WORD = string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class Case:
    kind: str
    form: str
    raw: str          # the credential itself (decoded)
    where: str        # user | tool_result | Bash | Write | Edit
    text: str         # the text as the session holds it (a message, a result, or one argument)
    before: str       # text == before + secret + after
    secret: str       # the credential as written in `text` (quoted, escaped, encoded)
    after: str
    keep: tuple[str, ...]  # parts of the connection string that must come out intact


def _word(rng: random.Random, n: int = 6) -> str:
    return rng.choice(string.ascii_lowercase) + "".join(rng.choice(_WORD) for _ in range(n - 1))


def _password(rng: random.Random) -> str:
    return "".join(rng.choice(PRINTABLE) for _ in range(rng.randint(8, 32)))


def _case(rng: random.Random, key: str) -> str:
    return rng.choice([key, key.lower(), key.upper()])


# Each kind: (connection string, the credential as written in it, the credential, parts to keep).
Built = tuple[str, str, str, tuple[str, ...]]


def azure_storage(rng: random.Random) -> Built:
    key = base64.b64encode(rng.randbytes(64)).decode()
    name = _word(rng, 12)
    text = rng.choice([
        f"DefaultEndpointsProtocol=https;AccountName={name};AccountKey={key};EndpointSuffix=core.windows.net",
        f"DefaultEndpointsProtocol=https;AccountName={name};AccountKey={key}",
        f"BlobEndpoint=https://{name}.blob.core.windows.net/;AccountName={name};AccountKey={key};",
        f"AccountEndpoint=https://{name}.documents.azure.com:443/;AccountKey={key};",
    ])
    return text, key, key, (name,)


def service_bus(rng: random.Random) -> Built:
    key = base64.b64encode(rng.randbytes(32)).decode()
    ns, entity = _word(rng, 10), _word(rng, 7)
    text = rng.choice([
        f"Endpoint=sb://{ns}.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={key}",
        f"Endpoint=sb://{ns}.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={key};"
        f"EntityPath={entity}",
        f"HostName={ns}.azure-devices.net;SharedAccessKeyName=iothubowner;SharedAccessKey={key}",
    ])
    return text, key, key, (ns, "SharedAccessKeyName=")


def _ado_value(rng: random.Random, value: str) -> str:
    """As SqlConnectionStringBuilder writes it, or (half the time) as a person may: quoted only where
    the parser needs it (a `;`, a quote or a space at either end)."""
    builder = re.search(r"[\"'=;\s]", value) is not None
    needed = ";" in value or value[0] in "\"' " or value[-1] in "\"' "
    if not (needed or (builder and rng.random() < 0.5)):
        return value
    if '"' in value and "'" not in value:
        return f"'{value}'"
    return '"' + value.replace('"', '""') + '"'


def ado_net(rng: random.Random) -> Built:
    password = _password(rng)
    written = _ado_value(rng, password)
    host, db, user = _word(rng, 8), _word(rng, 6), _word(rng, 5)
    pw = _case(rng, rng.choice(["Password", "Pwd"])) + "=" + written
    text = rng.choice([
        f"Server=tcp:{host}.database.windows.net,1433;Initial Catalog={db};Persist Security Info=False;"
        f"User ID={user};{pw};MultipleActiveResultSets=False;Encrypt=True;Connection Timeout=30;",
        f"Data Source={host};Initial Catalog={db};User Id={user};{pw};",
        f"Host={host};Port=5432;Database={db};Username={user};{pw}",
        f"Server={host};Database={db};Uid={user};{pw};SslMode=Required",
        f"{pw};User ID={user};Data Source={host};Initial Catalog={db}",
    ])
    return text, written, password, (host, db, user)


def _braced(rng: random.Random, value: str, always: bool) -> str:
    needed = ";" in value or "}" in value or value[0] in "{ " or value[-1] == " "
    return "{" + value.replace("}", "}}") + "}" if needed or always else value


def odbc(rng: random.Random) -> Built:
    password = _password(rng)
    written = _braced(rng, password, rng.random() < 0.3)
    host, db, user = _word(rng, 8), _word(rng, 6), _word(rng, 5)
    pwd = _case(rng, "Pwd") + "=" + written
    text = rng.choice([
        f"Driver={{ODBC Driver 18 for SQL Server}};Server=tcp:{host},1433;Database={db};Uid={user};{pwd};"
        f"Encrypt=yes;TrustServerCertificate=no;Connection Timeout=30;",
        f"Driver={{PostgreSQL Unicode}};Server={host};Port=5432;Database={db};Uid={user};{pwd};",
        f"DSN={db};UID={user};{pwd}",
    ])
    return text, written, password, (host if "DSN=" not in text else db, user)


def jdbc_sqlserver(rng: random.Random) -> Built:
    password = _password(rng)
    written = _braced(rng, password, rng.random() < 0.2)
    host, db, user = _word(rng, 8), _word(rng, 6), _word(rng, 5)
    text = rng.choice([
        f"jdbc:sqlserver://{host}:1433;databaseName={db};user={user};password={written};encrypt=true;"
        f"trustServerCertificate=false;loginTimeout=30;",
        f"jdbc:sqlserver://{host}.database.windows.net:1433;database={db};user={user}@{host};"
        f"password={written}",
    ])
    return text, written, password, (host, db, user)


def _query_value(password: str) -> str:
    # RFC 3986 query characters stay (`'`, `;`, `=`, `@`, `!`, ...); `&`, `%`, `+`, `#`, space, quotes
    # and the rest are percent-encoded, as the drivers decode them.
    return quote(password, safe="-._~!$'()*,;=:@/?")


def jdbc_postgresql(rng: random.Random) -> Built:
    password = _password(rng)
    written = _query_value(password)
    host, db, user = _word(rng, 8), _word(rng, 6), _word(rng, 5)
    text = rng.choice([
        f"jdbc:postgresql://{host}:5432/{db}?user={user}&password={written}&sslmode=require",
        f"jdbc:postgresql://{host}/{db}?user={user}&password={written}",
        f"jdbc:postgresql://{host}:5432/{db}?password={written}&user={user}&ssl=true",
    ])
    return text, written, password, (host, db, user)


def jdbc_mysql(rng: random.Random) -> Built:
    password = _password(rng)
    written = _query_value(password)
    host, db, user = _word(rng, 8), _word(rng, 6), _word(rng, 5)
    text = rng.choice([
        f"jdbc:mysql://{host}:3306/{db}?user={user}&password={written}&useSSL=true&serverTimezone=UTC",
        f"jdbc:mysql://{host}/{db}?password={written}&user={user}",
    ])
    return text, written, password, (host, db, user)


KINDS: dict[str, Callable[[random.Random], Built]] = {
    "azure-storage": azure_storage, "service-bus": service_bus, "ado-net": ado_net, "odbc": odbc,
    "jdbc-sqlserver": jdbc_sqlserver, "jdbc-postgresql": jdbc_postgresql, "jdbc-mysql": jdbc_mysql,
}


def _dotenv(value: str, whole: str) -> str:
    if re.fullmatch(r"[^\s#'\"\\]+", whole):  # unquoted where the whole string allows it
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _shell_double(value: str) -> str:
    return '"' + re.sub(r'([\\"$`])', r"\\\1", value) + '"'


def _shell_bare(value: str) -> str:
    return re.sub(r"([^A-Za-z0-9_./:=,@%+-])", r"\\\1", value)


def _yaml_single(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _json(c: str, w: str) -> str:
    return json.dumps({"ConnectionStrings": {"Default": c}, "Logging": {"LogLevel": {"Default": "Warning"}}},
                      indent=2)


def _json_log(c: str, w: str) -> str:
    return json.dumps({"level": "error", "msg": json.dumps({"event": "connect", "connectionString": c})})


def _csharp(c: str, w: str) -> str:
    return ("var builder = WebApplication.CreateBuilder(args);\n"
            f"builder.Services.AddDbContext<AppDb>(o => o.UseSqlServer({json.dumps(c)}));\n"
            "var app = builder.Build();\n")


def _yaml(c: str, w: str) -> str:
    return f"spring:\n  datasource:\n    url: {_yaml_single(c)}\n    hikari:\n      maximum-pool-size: 5\n"


# Each form: where the text goes, and the text holding the connection string `c` (`w`: the string
# itself, when `c` has a stand-in for its credential).
FORMS: dict[str, tuple[str, Callable[[str, str], str]]] = {
    "prose": ("user", lambda c, w: f"Why does this fail? I use {c} from the portal, and it times out."),
    "json": ("tool_result", _json),
    "json-in-json": ("tool_result", _json_log),
    "env": ("tool_result", lambda c, w: f"APP_ENV=prod\nDB_CONNECTION={_dotenv(c, w)}\nLOG_LEVEL=info\n"),
    "shell-single": ("Bash", lambda c, w: f"export DB_CONNECTION={shlex.quote(c)} && dotnet run"),
    "shell-double": ("Bash", lambda c, w: f"export DB_CONNECTION={_shell_double(c)}\ndotnet test"),
    "shell-bare": ("Bash", lambda c, w: f"DB_CONNECTION={_shell_bare(c)} ./migrate.sh --verbose"),
    "write": ("Write", _csharp),
    "edit": ("Edit", _yaml),
}


def make_case(rng: random.Random, kind: str, form: str) -> Case:
    text_of, (where, put) = KINDS[kind], FORMS[form]
    connection, written, raw, keep = text_of(rng)
    at = connection.index(written)
    marked = put(connection[:at] + _MARK + connection[at + len(written):], connection)
    text = put(connection, connection)
    before, after = marked.split(_MARK)
    assert text.startswith(before) and text.endswith(after), (kind, form)  # escaping is per character
    secret = text[len(before):len(text) - len(after)]
    return Case(kind, form, raw, where, text, before, secret, after, keep)


def cases(per_pair: int, seed: int = 34) -> list[Case]:
    """`per_pair` random cases of every kind in every form (one seeded generator)."""
    rng = random.Random(seed)
    return [make_case(rng, kind, form) for kind in KINDS for form in FORMS for _ in range(per_pair)]


_MARKS = re.compile(r"\[REDACTED:[^\]\s]*\]")


def pieces(secret: str, size: int = 6) -> set[str]:
    """Every run of `size` characters of `secret` (the whole of a shorter one)."""
    return {secret[i:i + size] for i in range(max(len(secret) - size, 0) + 1)}


def leaked(case: Case, redacted: str, size: int = 6) -> list[str]:
    """The pieces of the credential (as written, and itself) still in `redacted`; a piece that the text
    around the credential holds anyway proves nothing and is left out."""
    kept = _MARKS.sub("\0", redacted)
    return sorted(p for p in pieces(case.secret, size) | pieces(case.raw, size)
                  if p in kept and p not in case.before and p not in case.after)
