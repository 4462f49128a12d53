"""Teacher registry: families, pool strings, same-family exclusion (no network)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from teachers.registry import (
    TeacherConfigError,
    TeacherSpec,
    aliases,
    infer_family,
    parse_pool,
    split_by_family,
)


@pytest.mark.parametrize(("model", "family"), [
    # registry first: aliases and their model strings
    ("gpt-5", "openai"),
    ("deepseek", "deepseek"),
    ("deepseek/deepseek-reasoner", "deepseek"),
    ("claude-opus", "anthropic"),
    ("kimi", "moonshot"),
    ("glm", "zhipu"),
    # inferred from the name, provider prefixes stripped
    ("claude-opus-4-6", "anthropic"),
    ("claude-sonnet-4-5-20250929", "anthropic"),
    ("anthropic/claude-3-5-haiku-latest", "anthropic"),
    ("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic"),
    ("openrouter/anthropic/claude-opus-4.1", "anthropic"),
    ("vertex_ai/claude-sonnet-4-5@20250929", "anthropic"),
    ("gpt-4o-mini", "openai"),
    ("azure/gpt-4.1", "openai"),
    ("o1", "openai"),
    ("o3-mini", "openai"),
    ("openai/o4-mini", "openai"),
    ("openai/gpt-oss-120b", "openai"),
    ("gpt-5-codex", "openai"),
    ("codex-mini-latest", "openai"),
    ("deepseek/deepseek-chat", "deepseek"),
    ("together_ai/deepseek-ai/DeepSeek-V3", "deepseek"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek"),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen"),
    ("hosted_vllm/Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen"),
    ("openrouter/qwen/qwen3-coder", "qwen"),
    ("fireworks_ai/accounts/fireworks/models/qwen3-coder-480b-a35b-instruct", "qwen"),
    ("gemini/gemini-2.5-pro", "google"),
    ("google/gemma-3-27b-it", "google"),
    ("vertex_ai/gemini-2.5-flash", "google"),
    ("meta-llama/Llama-3.3-70B-Instruct", "meta"),
    ("groq/llama-3.1-8b-instant", "meta"),
    ("mistral/mistral-large-latest", "mistral"),
    ("mistral/codestral-latest", "mistral"),
    ("mistralai/Devstral-Small-2505", "mistral"),
    ("moonshot/kimi-k2-0905-preview", "moonshot"),
    ("openrouter/moonshotai/kimi-k2", "moonshot"),
    ("moonshot/moonshot-v1-8k", "moonshot"),
    ("zai/glm-4.6", "zhipu"),
    ("openrouter/z-ai/glm-4.5", "zhipu"),
    ("THUDM/glm-4-9b-chat", "zhipu"),
    ("xai/grok-4", "xai"),
    ("openrouter/x-ai/grok-code-fast-1", "xai"),
    # unknown
    ("openai/m", None),
    ("hosted_vllm/my-finetune", None),
    ("", None),
    (None, None),
])
def test_infer_family(model: str | None, family: str | None) -> None:
    assert infer_family(model) == family


def test_parse_pool_aliases_raw_and_endpoints() -> None:
    pool = parse_pool("gpt-5, deepseek,openrouter/qwen/qwen3-coder,a=openai/m@http://127.0.0.1:8000/v1,"
                      "b=openai/claude-sonnet-4-5@https://host.example/v1")
    assert [(t.name, t.model, t.family, t.api_base) for t in pool] == [
        ("gpt-5", "gpt-5", "openai", None),
        ("deepseek", "deepseek/deepseek-chat", "deepseek", None),
        ("openrouter/qwen/qwen3-coder", "openrouter/qwen/qwen3-coder", "qwen", None),
        ("a", "openai/m", None, "http://127.0.0.1:8000/v1"),
        ("b", "openai/claude-sonnet-4-5", "anthropic", "https://host.example/v1"),
    ]
    assert pool[1].params == {"max_tokens": 4096, "temperature": 0.7}  # default params from the TOML


def test_parse_pool_renamed_alias_and_list_input() -> None:
    pool = parse_pool(["fast=deepseek", "vertex_ai/claude-sonnet-4-5@20250929"])
    assert (pool[0].name, pool[0].model) == ("fast", "deepseek/deepseek-chat")
    assert (pool[1].model, pool[1].family) == ("vertex_ai/claude-sonnet-4-5@20250929", "anthropic")


@pytest.mark.parametrize("entry", ["gtp-5", "deepsek", "foo/bar", "x=not-a-model", ""])
def test_bad_teacher_lists_valid_aliases(entry: str) -> None:
    with pytest.raises(TeacherConfigError) as error:
        parse_pool(entry)
    assert "deepseek" in str(error.value) and "gpt-5" in str(error.value)


def test_duplicate_teacher_is_an_error() -> None:
    with pytest.raises(TeacherConfigError, match="twice"):
        parse_pool("deepseek,deepseek")


def test_registry_has_the_required_aliases() -> None:
    required = {"gpt-5", "gpt-5-mini", "deepseek", "deepseek-reasoner", "claude-opus", "claude-sonnet",
                "gemini", "qwen-coder", "kimi", "glm"}
    assert required <= set(aliases())
    assert parse_pool("deepseek")[0].model == "deepseek/deepseek-chat"


@pytest.mark.parametrize(("student", "eligible", "excluded"), [
    ("claude-opus-4-6", ["gpt-5", "deepseek", "qwen-coder"], ["claude-sonnet"]),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", ["gpt-5", "deepseek", "claude-sonnet"], ["qwen-coder"]),
    ("gpt-4.1", ["deepseek", "claude-sonnet", "qwen-coder"], ["gpt-5"]),
    ("my-own-model", ["gpt-5", "deepseek", "claude-sonnet", "qwen-coder"], []),
    (None, ["gpt-5", "deepseek", "claude-sonnet", "qwen-coder"], []),
])
def test_split_by_family(student: str | None, eligible: list[str], excluded: list[str]) -> None:
    pool = parse_pool("gpt-5,deepseek,claude-sonnet,qwen-coder")
    got = split_by_family(pool, student)
    assert [[t.name for t in group] for group in got] == [eligible, excluded]
    assert split_by_family(pool, student, allow_same_family=True) == (pool, [])


def test_spec_keeps_keys_out_of_params_and_repr() -> None:
    spec = TeacherSpec(name="a", model="openai/m", params={"api_key": "sk-test-SECRET123", "temperature": 0,
                                                           "extra_headers": {"Authorization": "Bearer zz"}})
    assert "api_key" not in spec.params and spec.api_key.get_secret_value() == "sk-test-SECRET123"
    assert "SECRET123" not in repr(spec) and "Bearer zz" not in repr(spec)
    assert "SECRET123" not in spec.model_dump_json()


def test_import_is_cheap() -> None:
    code = "import sys, teachers; sys.exit(any(m in sys.modules for m in ('litellm', 're2')))"
    assert subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1]).returncode == 0
