"""The teacher registry: aliases, families, and `--teachers` pool strings.

Aliases, family patterns and provider prefixes are data in `configs/teachers.toml`; this module only
reads them. Nothing here imports litellm unless a pool entry is neither an alias nor `name=...@url`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from configs import config_path
from ingestion.schema import ReplayError, StrictModel
from teachers.price import Price

# Params that carry credentials: never hashed, cached, logged or shown in a repr.
SECRET_PARAM = re.compile(r"(?i)api_?key|secret|password|credential|authorization|headers"
                          r"|(?:^|_)token$|^aws_")
# Call options that change how a request travels, not what the model answers.
_TRANSPORT_PARAMS = frozenset({"api_base", "base_url", "timeout", "num_retries", "max_retries", "stream"})
# `#price=` ends any pool entry: a fragment is never part of a model name, nor sent with a URL.
_PRICE_SUFFIX = re.compile(r"#price=(?P<price>[^#\s]+)$")
# An endpoint is http(s)://host[:port][/path]: lower-case scheme, no credentials, query or fragment.
_URL = re.compile(r"^https?://(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
                  r"(?::(?P<port>[0-9]{1,5}))?(?:/[A-Za-z0-9._~!$&'()*+,;=:%/-]*)?$")
_SCHEME_AFTER_AT = re.compile(r"@(?=[A-Za-z][A-Za-z0-9+.-]*://)")
_ENDPOINT_FORM = "name=<model>@http(s)://host[:port][/path]"


def safe_params(params: dict[str, Any]) -> dict[str, Any]:
    """`params` without credentials and transport options: what may be hashed, stored or shown.

    >>> safe_params({"temperature": 0, "api_key": "sk-x", "extra_headers": {"a": "b"}, "timeout": 9})
    {'temperature': 0}
    """
    return {k: v for k, v in params.items() if not SECRET_PARAM.search(k) and k not in _TRANSPORT_PARAMS}


class TeacherConfigError(ReplayError):
    """A `--teachers` entry that names no known alias nor a plausible litellm model."""


class TeacherSpec(StrictModel):
    """One pool entry: what to call and how.

    `api_key` is a `SecretStr` (masked in repr and JSON); a key passed in `params` is moved there.

    >>> spec = TeacherSpec(name="a", model="openai/m", params={"api_key": "sk-x", "temperature": 0})
    >>> spec.params, spec.api_key
    ({'temperature': 0}, SecretStr('**********'))
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    model: str
    family: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    api_base: str | None = None
    api_key: SecretStr | None = None
    price: Price | None = None

    @field_validator("price", mode="before")
    @classmethod
    def _price_text(cls, value: Any) -> Any:
        return Price.parse(value) if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _keys_out_of_params(cls, data: Any) -> Any:
        # Keys must never reach the cache key or a log line, so they live apart from params.
        if isinstance(data, dict) and isinstance(data.get("params"), dict) and "api_key" in data["params"]:
            params = dict(data["params"])
            key = params.pop("api_key")
            data = {**data, "params": params, "api_key": data.get("api_key") or key}
        return data

    def __repr_args__(self) -> Any:
        # Other credentials a user put in params (extra_headers, aws_*) stay usable but never print.
        for name, value in super().__repr_args__():
            yield name, (safe_params(value) if name == "params" else value)


class _Alias(StrictModel):
    model: str
    family: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    api_base: str | None = None
    price: str | Price | None = None


class _Registry(StrictModel):
    aliases: dict[str, _Alias]
    family_patterns: dict[str, list[str]]
    provider_prefixes: dict[str, list[str]]


@lru_cache(maxsize=1)
def _registry() -> _Registry:
    with config_path("teachers.toml").open("rb") as handle:
        return _Registry.model_validate(tomllib.load(handle))


@lru_cache(maxsize=1)
def _patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((family, re.compile("|".join(f"(?:{p})" for p in pats), re.IGNORECASE))
                 for family, pats in _registry().family_patterns.items())


def aliases() -> list[str]:
    """Every alias in `configs/teachers.toml`, sorted.

    >>> "deepseek" in aliases() and "gpt-5" in aliases()
    True
    """
    return sorted(_registry().aliases)


def strip_provider(model: str) -> str:
    """The model name without litellm routing prefixes (where it is served, not who made it).

    >>> strip_provider("openrouter/qwen/qwen3-coder"), strip_provider("hosted_vllm/Qwen/Qwen3-8B")
    ('qwen/qwen3-coder', 'Qwen/Qwen3-8B')
    """
    prefixes = set(_registry().provider_prefixes["strip"])
    parts = model.split("/")
    while len(parts) > 1 and parts[0].lower() in prefixes:
        parts = parts[1:]
    return "/".join(parts)


@lru_cache(maxsize=1024)
def infer_family(model: str | None) -> str | None:
    """The family of a model: the registry's word for an alias or its model, else from the name.

    >>> infer_family("claude-opus-4-6"), infer_family("Qwen/Qwen3-Coder-30B-A3B-Instruct")
    ('anthropic', 'qwen')
    >>> infer_family("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"), infer_family("my-model")
    ('anthropic', None)
    """
    if not model:
        return None
    registry = _registry()
    for name, alias in registry.aliases.items():
        if model in (name, alias.model) and alias.family:
            return alias.family
    name = strip_provider(model.strip())
    for text in (name.rsplit("/", 1)[-1], name):
        for family, pattern in _patterns():
            if pattern.search(text):
                return family
    return None


def _is_litellm_model(model: str) -> bool:
    from teachers.llm import load_litellm

    try:
        load_litellm().get_llm_provider(model)
    except Exception:  # litellm raises its BadRequestError for "LLM Provider NOT provided"
        return False
    return True


def _is_priced_model(model: str) -> bool:
    from teachers.llm import load_litellm

    try:
        info = load_litellm().get_model_info(model)
    except Exception:  # litellm raises for names its cost map lacks
        return False
    return bool(info.get("input_cost_per_token") or info.get("output_cost_per_token"))


def _shown(entry: str) -> str:
    from teachers.redact import redact_text

    return repr(redact_text(entry)[0])  # an entry may hold a key (user:key@host): never echo it


def _known_model(model: str) -> bool:
    from teachers.llm import load_litellm

    return model in load_litellm().model_cost


def _split_endpoint(entry: str, rest: str) -> tuple[str, str | None]:
    """(model, url or None) of `rest`; a model string holding `@` or `://` is never passed on, except a
    name litellm knows with a version after `@` (vertex_ai/claude-sonnet-4-5@20250929)."""
    at = _SCHEME_AFTER_AT.search(rest)
    if at is None:
        if "://" in rest or ("@" in rest and not _known_model(rest)):
            raise TeacherConfigError(f"bad teacher endpoint {_shown(entry)}: '@' must be followed by "
                                     f"http:// or https:// ({_ENDPOINT_FORM})")
        return rest, None
    model, url = rest[:at.start()], rest[at.end():]
    match = _URL.match(url)
    if match is None or (match["port"] and not 0 < int(match["port"]) < 65536):
        raise TeacherConfigError(f"bad teacher endpoint URL in {_shown(entry)}: expected {_ENDPOINT_FORM} "
                                 "(lower-case http or https, no user:password@)")
    if not model or "@" in model or "://" in model:
        raise TeacherConfigError(f"bad teacher model in {_shown(entry)}: expected {_ENDPOINT_FORM}")
    return model, url


def _spec(entry: str) -> TeacherSpec:
    priced = _PRICE_SUFFIX.search(entry)
    if priced:
        try:
            price = Price.parse(priced["price"])
        except ValueError as error:
            raise TeacherConfigError(f"teacher {_shown(entry)}: {error}") from None
        if price.as_model and not _is_priced_model(price.as_model):
            raise TeacherConfigError(f"teacher {_shown(entry)}: litellm's cost map has no price for "
                                     f"{price.as_model!r}; give USD per 1M tokens (INPUT/OUTPUT) instead")
        return _spec(entry[:priced.start()]).model_copy(update={"price": price})
    registry = _registry()
    if entry in registry.aliases:
        alias = registry.aliases[entry]
        return TeacherSpec(name=entry, model=alias.model, family=alias.family or infer_family(alias.model),
                           params=alias.params, api_base=alias.api_base, price=alias.price)
    name, _, rest = entry.partition("=") if "=" in entry else ("", "", entry)
    if "=" in entry and (not name or any(c in name for c in "@/: \t")):
        raise TeacherConfigError(f"bad teacher entry {_shown(entry)}: expected {_ENDPOINT_FORM}")
    model, url = _split_endpoint(entry, rest)
    if url and not name:
        raise TeacherConfigError(f"an endpoint needs a name: {_ENDPOINT_FORM} (got {_shown(entry)})")
    if name:
        if model in registry.aliases and not url:
            return _spec(model).model_copy(update={"name": name})
        if url or _is_litellm_model(model):
            return TeacherSpec(name=name, model=model, family=infer_family(model), api_base=url)
    elif _is_litellm_model(model):
        return TeacherSpec(name=entry, model=entry, family=infer_family(entry))
    raise TeacherConfigError(
        f"unknown teacher {_shown(entry)}: not an alias ({', '.join(aliases())}), not a litellm model string "
        f"(provider/model, e.g. openrouter/qwen/qwen3-coder), nor {_ENDPOINT_FORM}")


def parse_pool(text: str | Iterable[str]) -> list[TeacherSpec]:
    """Pool entries from `--teachers`: aliases, litellm strings, or `name=<model>@<base url>`; any of
    them may end in `#price=<model>` or `#price=INPUT/OUTPUT[/CACHED_INPUT[/CACHE_WRITE]]` (USD per 1M).

    >>> [(t.name, t.model, t.family) for t in parse_pool("deepseek,a=openai/m@http://127.0.0.1:8000/v1")]
    [('deepseek', 'deepseek/deepseek-chat', 'deepseek'), ('a', 'openai/m', None)]
    """
    entries = [e.strip() for e in (text.split(",") if isinstance(text, str) else text)]
    specs = [_spec(entry) for entry in entries if entry]
    if not specs:
        raise TeacherConfigError(f"no teachers given; choose from {', '.join(aliases())}")
    names = [spec.name for spec in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise TeacherConfigError(f"teacher listed twice: {', '.join(duplicates)} (use name=... to rename)")
    return specs


def split_by_family(teachers: Sequence[TeacherSpec], student_model: str | None,
                    allow_same_family: bool = False) -> tuple[list[TeacherSpec], list[TeacherSpec]]:
    """(eligible, excluded): a teacher of the student's family never votes on the student's states.

    >>> pool = parse_pool("deepseek,claude-opus")
    >>> [[t.name for t in group] for group in split_by_family(pool, "claude-sonnet-4-5-20250929")]
    [['deepseek'], ['claude-opus']]
    """
    student = infer_family(student_model)
    if allow_same_family or student is None:
        return list(teachers), []
    eligible = [t for t in teachers if t.family != student]
    return eligible, [t for t in teachers if t.family == student]
