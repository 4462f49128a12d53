"""What one `collect.run` is asked to do, and the agent it drives (configs/collect_agent.toml)."""

from __future__ import annotations

import hashlib
import tomllib
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from configs import config_path
from ingestion.schema import ReplayError, StrictModel


class CollectError(ReplayError):
    """A problem with the run as a whole (bad flags, no docker engine): one line for the user."""


LogprobsMode = Literal["raw_logprobs", "processed_logprobs", "raw_logits", "processed_logits"]


class CollectConfig(StrictModel):
    instances: Path
    student_url: str | None                # None: the provider's own endpoint (--student-provider)
    student_model: str
    out: Path
    api_key: str = "EMPTY"                 # vLLM accepts anything unless started with --api-key
    student_provider: str | None = None    # None: a vLLM server (token ids); else litellm's provider name
    max_turns: int = Field(30, ge=1)
    workers: int = Field(1, ge=1)
    samples: int = Field(1, ge=1)          # rollouts per instance
    seed: int | None = None                # the base of each rollout's seed (seed_of); None: no seed sent
    evaluate: bool = False
    namespace: str = "swebench"
    image_tag: str = "latest"
    pull: bool = False                     # never pull unless asked: a pull can be tens of GB
    temperature: float | None = None       # None: the server's default (vLLM: generation_config.json)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    # what the server was started with (`vllm serve --logprobs-mode`, default raw_logprobs: before
    # temperature and top-p); the API cannot tell, so the run records what it is told
    logprobs_mode: LogprobsMode = "raw_logprobs"
    reasoning_echo: Literal["auto", "field", "inline", "none"] = "auto"
    request_timeout: float = Field(600.0, gt=0)
    command_timeout: int = Field(120, ge=1)
    output_limit: int = Field(20_000, ge=200)   # bytes of one tool observation (head + tail kept)
    mem_limit: str = Field("8g", pattern=r"^\d+[bkmgBKMG]?$")
    cpus: float = Field(2.0, gt=0)
    pids_limit: int = Field(4096, ge=64)
    eval_timeout: int = Field(1800, ge=1)

    @model_validator(mode="after")
    def _a_server(self) -> CollectConfig:
        if self.student_url is None and self.student_provider is None:   # the openai client would pick
            raise ValueError("student_url is required without a student_provider")   # api.openai.com
        return self

    def seed_of(self, instance_id: str, sample: int) -> int | None:
        """The seed sent with every request of one (instance, sample) rollout: distinct per sample,
        the same in a rerun and on any node; None without --seed.

        >>> config = CollectConfig(instances="i", student_url="u", student_model="m", out="o", seed=7)
        >>> config.seed_of("a__b-1", 0) == config.seed_of("a__b-1", 0) != config.seed_of("a__b-1", 1)
        True
        >>> config.model_copy(update={"seed": None}).seed_of("a__b-1", 0) is None
        True
        """
        if self.seed is None:
            return None
        digest = hashlib.sha256(f"{self.seed}:{instance_id}:{sample}".encode()).digest()
        return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF    # 31 bits: every server's seed type


class AgentSpec(StrictModel):
    """The agent's prompts, tool schemas and feedback texts; see configs/collect_agent.toml."""

    version: int
    system_prompt: str
    instance_prompt: str
    tools: list[dict[str, Any]]
    unparsed_tool_call: str                # feedback: a call left as text in the reply
    truncated_reply: str                   # feedback: a reply cut at max_tokens
    tool_call_markers: list[str]           # text that means "a tool call the server did not parse"
    think_tags: tuple[str, str]            # the reasoning parser's tags (inline reasoning echo)
    probe_prompt: str                      # the start-up probe's request (collect/probe.py)

    def first_messages(self, problem_statement: str) -> list[dict[str, Any]]:
        """The conversation a rollout starts from.

        >>> spec = load_agent_spec().model_copy(update={"instance_prompt": "fix: {problem_statement}"})
        >>> spec.first_messages("x {y}")[1]
        {'role': 'user', 'content': 'fix: x {y}'}
        """
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self.instance_prompt.format(problem_statement=problem_statement)}]

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.tools]


@cache
def load_agent_spec() -> AgentSpec:
    """The packaged configs/collect_agent.toml, read once."""
    text = config_path("collect_agent.toml").read_text(encoding="utf-8")
    return AgentSpec.model_validate(tomllib.loads(text))
