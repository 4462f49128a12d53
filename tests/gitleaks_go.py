"""Just enough Go to read gitleaks' rule files: the `tps` and `fps` of each rule function.

gitleaks' `cmd/generate/config/rules/*.go` build their test cases with string literals, `+`, slices,
maps, `append`, `fmt.Sprintf`, `secrets.NewSecret(regex)` (a random string matching a regex, through
lucasjones/reggen) and `utils.GenerateSampleSecrets` (one secret in 30 file formats). This module
evaluates those expressions in Python, with a seeded random generator, so `tests/gitleaks_cases.py`
can turn them into data without a Go toolchain. Anything else (a loop, a helper it does not know) makes
that rule's cases unreadable: the generator counts and names them.
"""

from __future__ import annotations

import base64
import json
import random
import re
import re._constants as sc
import re._parser as sp
from dataclasses import dataclass, field
from typing import Any

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<raw>`[^`]*`)
  | (?P<str>"(?:\\.|[^"\\\n])*")
  | (?P<rune>'(?:\\.|[^'\\\n])+')
  | (?P<num>\d+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\.\.\.|:=|==|!=|&&|\|\||[-+*/%<>!=&|^.,;:(){}\[\]])
""", re.X | re.S)
_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-7]{3})|(.))", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b",
           "f": "\f", "v": "\v"}


class Unreadable(Exception):
    """A construct this reader does not evaluate."""


@dataclass
class Tok:
    kind: str
    text: str
    line: int


def _unquote(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        hexa, uni, big, octal, simple = m.groups()
        if hexa or octal:
            return chr(int(hexa, 16) if hexa else int(octal, 8))
        if uni or big:
            return chr(int(uni or big, 16))
        return _SIMPLE[simple]

    return _ESCAPE.sub(one, text[1:-1])


def tokens(source: str) -> list[Tok]:
    out, pos, line = [], 0, 1
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if not m:
            raise Unreadable(f"cannot tokenise line {line}: {source[pos:pos + 20]!r}")
        kind = m.lastgroup or ""
        text = m.group(0)
        if kind != "space":
            out.append(Tok(kind, text, line))
        line += text.count("\n")
        pos = m.end()
    return out


# --- random strings from a regex (what reggen does: each repeat picks a count, each class a member) ---

_PRINTABLE = [chr(c) for c in range(32, 127)]
_CATEGORY = {
    sc.CATEGORY_DIGIT: "0123456789",
    sc.CATEGORY_WORD: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
    sc.CATEGORY_SPACE: " ",
    sc.CATEGORY_NOT_DIGIT: "abcdefXYZ",
    sc.CATEGORY_NOT_WORD: "-.!",
    sc.CATEGORY_NOT_SPACE: "abcdefXYZ0123456789",
}


def _class(items: list[Any]) -> list[str]:
    members: set[str] = set()
    negate = False
    for op, av in items:
        if op is sc.NEGATE:
            negate = True
        elif op is sc.LITERAL:
            members.add(chr(av))
        elif op is sc.RANGE:
            members.update(chr(c) for c in range(av[0], av[1] + 1))
        elif op is sc.CATEGORY:
            members.update(_CATEGORY[av])
    if negate:
        return [c for c in _PRINTABLE if c not in members and c not in "\n"]
    return sorted(members)


def _emit(parsed: Any, rng: random.Random, out: list[str], limit: int) -> None:
    for op, av in parsed:
        if op is sc.LITERAL:
            out.append(chr(av))
        elif op is sc.NOT_LITERAL:
            out.append(rng.choice([c for c in _PRINTABLE if ord(c) != av]))
        elif op is sc.ANY:
            out.append(rng.choice(_CATEGORY[sc.CATEGORY_WORD]))
        elif op is sc.IN:
            out.append(rng.choice(_class(av)))
        elif op in (sc.MAX_REPEAT, sc.MIN_REPEAT, getattr(sc, "POSSESSIVE_REPEAT", None)):
            low, high, sub = av
            high = low + limit if high is sc.MAXREPEAT else high
            for _ in range(rng.randint(low, high)):
                _emit(sub, rng, out, limit)
        elif op is sc.SUBPATTERN:
            _emit(av[-1], rng, out, limit)
        elif op is sc.BRANCH:
            _emit(rng.choice(av[1]), rng, out, limit)
        elif op in (sc.AT, sc.ASSERT, sc.ASSERT_NOT):
            continue
        else:
            raise Unreadable(f"regex construct {op}")


def random_match(regex: str, rng: random.Random, limit: int = 10) -> str:
    """A random string that `regex` (RE2 syntax, as gitleaks writes it) matches.

    >>> random_match("ab[0-9]{3}", random.Random(1))[:2]
    'ab'
    """
    pattern = re.sub(r"\(\?i\)", "", regex).replace(r"\z", "$")  # reggen keeps the case the regex spells
    out: list[str] = []
    _emit(sp.parse(pattern), rng, out, limit)
    return "".join(out)


# --- the functions rule files call -------------------------------------------------------------------

_SAMPLES = [  # utils.GenerateSampleSecrets, the cases that are not TODO at the pinned commit
    "{i}Token=\"{s}\"", "{i}Token = \"{s}\"", "{i}Token={s}", "{i}Token = {s}",
    "{\n    \"{i}_token\": \"{s}\"\n}", '{"config.ini": "{I}_TOKEN={s}\\nBACKUP_ENABLED=true"}',
    "<{i}Token>\n    {s}\n</{i}Token>", "{i}_token: {s}", "{i}_token: '{s}'", "{i}_token: \"{s}\"",
    'string {i}Token = "{s}";', 'var {i}Token string = "{s}"', '{i}Token := "{s}"', "{i}Token := `{s}`",
    "String {i}Token = \"{s}\";", "var {i}Token = \"{s}\"", '${i}Token .= "{s}"', "{i}Token = '{s}'",
    '{i}Token = "{s}"', 'System.setProperty("{I}_TOKEN", "{s}")', "  \"{i}Token\" => \"{s}\"",
    "{i}_TOKEN = \"{s}\"", "{i}_TOKEN := \"{s}\"", "{i}_TOKEN ::= \"{s}\"", "{i}_TOKEN :::= \"{s}\"",
    "{i}_TOKEN ?= \"{s}\"",
]


def sample_secrets(identifier: str, secret: str) -> list[str]:
    return [s.replace("{i}", identifier).replace("{I}", identifier.upper()).replace("{s}", secret)
            for s in _SAMPLES]


def jwt_base64_values() -> list[str]:
    """jwt.go's generateTestValues: each JOSE header parameter's examples as a JWT, base64 four ways."""
    suffix = (".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0"
              "cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
    out = []
    for key, values in JWT_HEADERS.items():
        for value in values:
            header = f'{{"{key}":{value}}}'.encode()
            jwt = base64.urlsafe_b64encode(header).rstrip(b"=") + suffix.encode()
            std = base64.b64encode(jwt).decode()
            url = base64.urlsafe_b64encode(jwt).decode()
            out += [std, std.rstrip("="), url, url.rstrip("=")]
    return out


JWT_HEADERS: dict[str, list[str]] = {}  # filled from jwt.go's own map by the generator


@dataclass
class Env:
    rng: random.Random
    names: dict[str, Any] = field(default_factory=dict)


def _call(name: str, args: list[Any], env: Env) -> Any:
    if name in ("secrets.NewSecret", "newPlausibleSecret"):
        return random_match(args[0], env.rng)
    if name == "utils.GenerateSampleSecrets":
        return sample_secrets(args[0], args[1])
    if name == "utils.GenerateSampleSecret":
        return f'{args[0]}_api_token = "{args[1]}"'
    sizes = {"utils.Numeric": "[0-9]", "utils.Hex": "[a-f0-9]", "utils.AlphaNumeric": "[a-z0-9]",
             "utils.AlphaNumericExtendedShort": "[a-z0-9_-]", "utils.AlphaNumericExtended": r"[a-z0-9=_\-]",
             "utils.AlphaNumericExtendedLong": r"[a-z0-9\/=_\+\-]"}
    if name in sizes:
        return f"{sizes[name]}{{{args[0]}}}"
    if name == "utils.Hex8_4_4_4_12":
        return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    if name == "fmt.Sprintf":
        values = iter(args[1:])
        return re.sub(r"%[sdvq]", lambda m: (json.dumps(next(values)) if m.group(0) == "%q"
                                           else str(next(values))), args[0])
    if name == "strings.Repeat":
        return args[0] * int(args[1])
    if name == "strings.ToUpper":
        return args[0].upper()
    if name.endswith("StdEncoding.EncodeToString") or name.endswith("URLEncoding.EncodeToString"):
        raw = args[0].encode()
        encoded = (base64.urlsafe_b64encode(raw) if "URL" in name else base64.b64encode(raw)).decode()
        return encoded.rstrip("=") if name.split(".")[-2].startswith("Raw") else encoded
    if name == "generateTestValues":
        return jwt_base64_values()
    raise Unreadable(f"call {name}")


class Parser:
    def __init__(self, toks: list[Tok], env: Env) -> None:
        self.toks, self.i, self.env = toks, 0, env

    def peek(self, k: int = 0) -> Tok:
        return self.toks[self.i + k] if self.i + k < len(self.toks) else Tok("eof", "", -1)

    def take(self, text: str | None = None) -> Tok:
        tok = self.peek()
        if text is not None and tok.text != text:
            raise Unreadable(f"expected {text!r} at line {tok.line}, got {tok.text!r}")
        self.i += 1
        return tok

    def skip_balanced(self) -> None:
        pairs = {"(": ")", "[": "]", "{": "}"}
        closing = [pairs[self.take().text]]
        while closing:
            tok = self.take()
            if tok.kind == "eof":
                raise Unreadable("unbalanced")
            if tok.text in pairs:
                closing.append(pairs[tok.text])
            elif tok.text == closing[-1]:
                closing.pop()

    def expr(self) -> Any:
        value = self.unary()
        while self.peek().text == "+":
            self.take()
            right = self.unary()
            if not isinstance(value, str) or not isinstance(right, str):
                raise Unreadable("+ on non-strings")
            value += right
        return value

    def _type(self) -> str:
        # []string, map[string]string, config.Rule, []config.Rule ...
        parts = []
        while True:
            tok = self.peek()
            if tok.text == "[":
                self.take()
                self.take("]")
                parts.append("[]")
            elif tok.text == "map":
                self.take()
                self.take("[")
                parts.append("map[" + self._type() + "]")
                self.take("]")
            elif tok.kind == "ident":
                parts.append(self._dotted())
                return "".join(parts)
            else:
                raise Unreadable(f"type at line {tok.line}")

    def _dotted(self) -> str:
        name = self.take().text
        while self.peek().text == "." and self.peek(1).kind == "ident":
            self.take()
            name += "." + self.take().text
        return name

    def composite(self, kind: str) -> Any:
        self.take("{")
        items: list[Any] = []
        keyed: dict[Any, Any] = {}
        while self.peek().text != "}":
            if kind not in ("[]string", "map[string]string", "map[string][]string"):
                self.skip_balanced_until_close()
                return ("opaque", kind)
            value = self.expr()
            if self.peek().text == ":":
                self.take()
                keyed[value] = self.composite("[]string") if kind.endswith("][]string") else self.expr()
            else:
                items.append(value)
            if self.peek().text == ",":
                self.take()
        self.take("}")
        return keyed if kind.startswith("map") else items

    def skip_balanced_until_close(self) -> None:
        depth = 1
        while depth:
            tok = self.take()
            if tok.kind == "eof":
                raise Unreadable("unbalanced")
            depth += tok.text in "({[" and tok.kind == "op"
            depth -= tok.text in ")}]" and tok.kind == "op"

    def unary(self) -> Any:
        tok = self.peek()
        if tok.kind in ("raw", "str"):
            self.take()
            return tok.text[1:-1] if tok.kind == "raw" else _unquote(tok.text)
        if tok.kind == "num":
            self.take()
            return int(tok.text)
        if tok.text == "(":
            self.take()
            value = self.expr()
            self.take(")")
            return value
        if tok.text == "&":
            self.take()
            return self.unary()
        if tok.text in ("[", "map"):
            kind = self._type()
            if self.peek().text == "(":  # a conversion: []byte(s) is s here
                self.take()
                value = self.expr()
                self.take(")")
                return value
            return self.composite(kind)
        if tok.kind == "ident":
            name = self._dotted()
            if self.peek().text == "{":
                return self.composite(name)
            if self.peek().text == "(":
                args, spread = self.args()
                if name == "append":
                    base = list(args[0])
                    rest = args[1:]
                    if spread:
                        rest = rest[:-1] + list(rest[-1])
                    return base + rest
                if spread:
                    raise Unreadable(f"spread into {name}")
                return _call(name, args, self.env)
            if name == "nil":
                return []
            if name in self.env.names:
                value = self.env.names[name]
                if isinstance(value, Unreadable):
                    raise value
                return value
            raise Unreadable(f"name {name}")
        raise Unreadable(f"token {tok.text!r} at line {tok.line}")

    def args(self) -> tuple[list[Any], bool]:
        self.take("(")
        args, spread = [], False
        while self.peek().text != ")":
            args.append(self.expr())
            if self.peek().text == "...":
                self.take()
                spread = True
            if self.peek().text == ",":
                self.take()
        self.take(")")
        return args, spread


@dataclass
class RuleCases:
    function: str
    rule_id: str
    tps: list[str]
    fps: list[str]
    error: str = ""
    names: dict[str, Any] = field(default_factory=dict)


def functions(toks: list[Tok]) -> dict[str, tuple[int, int]]:
    """name -> (first token of the body, one past its closing brace), for every top-level func."""
    out, i = {}, 0
    while i < len(toks):
        if toks[i].text == "func" and toks[i + 1].kind == "ident":
            name, j = toks[i + 1].text, i + 2
            while toks[j].text != "{":
                j += 1
            depth, k = 1, j + 1
            while depth:
                depth += toks[k].text == "{" and toks[k].kind == "op"
                depth -= toks[k].text == "}" and toks[k].kind == "op"
                k += 1
            out[name] = (j + 1, k - 1)
            i = k
        else:
            i += 1
    return out


def rule_cases(name: str, body: list[Tok], rng: random.Random,
               globals_: dict[str, Any] | None = None) -> RuleCases:
    """Run a rule function's statements that build values; the cases are what it validates with."""
    ids = [body[i + 2].text for i in range(len(body) - 2)
           if body[i].text == "RuleID" and body[i + 1].text == ":" and body[i + 2].kind == "str"]
    rule_id = _unquote(ids[0]) if ids else ""
    env = Env(rng, dict(globals_ or {}))
    p = Parser(body, env)
    result = RuleCases(name, rule_id, [], [], names=env.names)
    while p.peek().kind != "eof":
        tok = p.peek()
        try:
            if tok.text in ("for", "if", "switch"):
                raise Unreadable(f"{tok.text} statement at line {tok.line}")
            if tok.text == "var":
                p.take()
                _var_specs(p, env)
                continue
            if tok.text == "return":
                p.take()
                call = p._dotted()
                if call == "&":
                    result.error = "validates nothing"
                    return result
                if call not in ("utils.Validate", "utils.ValidateWithPaths"):
                    raise Unreadable(f"returns {call}")
                args, _ = p.args()
                tps, fps = args[1], args[2]
                result.tps = list(tps.values()) if isinstance(tps, dict) else list(tps or [])
                result.fps = list(fps.values()) if isinstance(fps, dict) else list(fps or [])
                return result
            if tok.kind == "ident" and p.peek(1).text in (":=", "=", "."):
                target = p._dotted()
                if p.peek().text not in (":=", "="):
                    raise Unreadable(f"statement at line {tok.line}")
                p.take()
                start = p.i
                try:
                    env.names[target] = p.expr()
                except Unreadable as error:
                    env.names[target] = error
                    p.i = start
                    _skip_statement(p)
                continue
            raise Unreadable(f"statement {tok.text!r} at line {tok.line}")
        except Unreadable as error:
            result.error = str(error)
            return result
    result.error = "no utils.Validate"
    return result


def _var_specs(p: Parser, env: Env) -> None:
    """`var a = x` or `var ( a = x; b T = y )`."""
    grouped = p.peek().text == "("
    if grouped:
        p.take()
    while True:
        target = p.take().text
        if p.peek().text != "=":
            p._type()
        if p.peek().text == "=":
            p.take()
            env.names[target] = p.expr()
        if not grouped or p.peek().text == ")":
            break
        if p.peek().text == ";":
            p.take()
    if grouped:
        p.take(")")


def package_vars(toks: list[Tok], env: Env) -> None:
    """The top-level `var` declarations of a file (values some rule functions validate with)."""
    depth = 0
    p = Parser(toks, env)
    while p.peek().kind != "eof":
        tok = p.peek()
        if tok.kind == "op" and tok.text in "({[":
            depth += 1
        elif tok.kind == "op" and tok.text in ")}]":
            depth -= 1
        elif tok.text == "var" and depth == 0:
            p.take()
            try:
                _var_specs(p, env)
            except Unreadable:
                pass
            continue
        p.take()


def _skip_statement(p: Parser) -> None:
    line = p.peek().line
    while p.peek().kind != "eof":
        tok = p.peek()
        if tok.text in "({[" and tok.kind == "op":
            p.skip_balanced()
            continue
        if tok.line != line and p.toks[p.i - 1].text not in (",", "+", "(", "{", "["):
            return
        p.take()
