"""What one `collect.run` is asked to do, and the agent it drives (configs/collect_agent.toml)."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import Field

from configs import config_path
from ingestion.schema import ReplayError, StrictModel


class CollectError(ReplayError):
    """A problem with the run as a whole (bad flags, no docker engine): one line for the user."""


class CollectConfig(StrictModel):
    instances: Path
    student_url: str
    student_model: str
    out: Path
    api_key: str = "EMPTY"                 # vLLM accepts anything unless started with --api-key
    max_turns: int = Field(30, ge=1)
    workers: int = Field(1, ge=1)
    evaluate: bool = False
    namespace: str = "swebench"
    image_tag: str = "latest"
    pull: bool = False                     # never pull unless asked: a pull can be tens of GB
    temperature: float | None = None       # None: the server's default (vLLM: generation_config.json)
    max_tokens: int | None = None
    request_timeout: float = Field(600.0, gt=0)
    command_timeout: int = Field(120, ge=1)
    output_limit: int = Field(20_000, ge=200)   # bytes of one tool observation (head + tail kept)
    mem_limit: str = Field("8g", pattern=r"^\d+[bkmgBKMG]?$")
    cpus: float = Field(2.0, gt=0)
    pids_limit: int = Field(4096, ge=64)
    eval_timeout: int = Field(1800, ge=1)


class AgentSpec(StrictModel):
    """The agent's prompts and tool schemas; see configs/collect_agent.toml."""

    version: int
    system_prompt: str
    instance_prompt: str
    tools: list[dict[str, Any]]

    def first_messages(self, problem_statement: str) -> list[dict[str, Any]]:
        """The conversation a rollout starts from.

        >>> spec = AgentSpec(version=1, system_prompt="sys", instance_prompt="fix: {problem_statement}",
        ...                  tools=[])
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
