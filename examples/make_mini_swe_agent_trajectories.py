"""Make mini-swe-agent trajectories with the real tool against a scripted model on 127.0.0.1.

    pip install mini-swe-agent==2.4.6   # or --no-deps --target DIR, then PYTHONPATH=DIR
    python examples/make_mini_swe_agent_trajectories.py [--out tests/data/trajectories/mini_swe_agent/made]

Runs mini-swe-agent's own `DefaultAgent` in a `LocalEnvironment` (no docker) on a tiny project twice, from
its built-in configs: `mini_textbased.yaml` (`LitellmTextbasedModel`: actions in a ```mswea_bash_command
block, observations as user messages with `<returncode>`) and `default.yaml` (`LitellmModel`: `bash` tool
calls, observations as `tool` messages). The model is a loopback OpenAI-compatible server
(tests/llm_server.py) reached through litellm as mini-swe-agent calls it; it answers from a script (a
listing, a read, a failing test run, an edit, the passing run, the submission). Each run's trajectory is
saved where mini-swe-agent saves it (`agent.save`, `*.traj.json`). Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.llm_server import LLMServer, Reply, chat_completion  # noqa: E402

MODEL = "openai/gpt-4o-mini"      # the name the trajectory records (litellm's OpenAI route to our server)
PROJECT = {"calc.py": "def add(a, b):\n    return a - b\n",
           "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"}
TEST = "python -c 'import test_calc; test_calc.test_add()' && echo passed"
SCRIPT = [("List the project first.", "ls"),
          ("Read the function under test.", "cat calc.py"),
          ("Run the test to see it fail.", TEST),
          ("`add` subtracts: fix the operator.", "sed -i 's/a - b/a + b/' calc.py"),
          ("Run the test again.", TEST),
          ("The test passes: submit.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]


def responder(text_based: bool):
    def respond(body: dict[str, Any]) -> Reply:
        step = sum(m.get("role") == "assistant" for m in body["messages"])
        thought, command = SCRIPT[min(step, len(SCRIPT) - 1)]
        if text_based:
            return Reply(chat_completion(f"THOUGHT: {thought}\n\n```mswea_bash_command\n{command}\n```",
                                         model=body.get("model", "")))
        calls = [{"name": "bash", "arguments": {"command": command}}]
        return Reply(chat_completion(thought, tool_calls=calls, model=body.get("model", "")))
    return respond


def run(config_name: str, out: Path, project: Path) -> Path:
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.config import builtin_config_dir, get_config_from_spec
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models import get_model

    text_based = "textbased" in config_name
    config = get_config_from_spec(str(builtin_config_dir / config_name))
    with LLMServer(responder(text_based)) as server:
        model_config = {**config.get("model", {}), "model_name": MODEL, "cost_tracking": "ignore_errors",
                        "model_kwargs": {**config.get("model", {}).get("model_kwargs", {}),
                                         "api_base": server.url, "api_key": "loopback"}}
        if text_based:
            model_config["model_class"] = "litellm_textbased"
        model = get_model(config=model_config)
        agent_config = {k: v for k, v in config.get("agent", {}).items() if k != "mode"}
        path = out / f"{config_name.removesuffix('.yaml')}.traj.json"
        env = LocalEnvironment(cwd=str(project), env=config.get("environment", {}).get("env", {}))
        limits = {"step_limit": 12, "cost_limit": 0, "output_path": path}
        agent = DefaultAgent(model, env, **{**agent_config, **limits})
        agent.run("The test in test_calc.py fails: fix calc.py.")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests/data/trajectories/mini_swe_agent/made")
    args = parser.parse_args()
    os.environ.setdefault("MSWEA_CONFIGURED", "true")            # no first-run setup prompt
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args.out.mkdir(parents=True, exist_ok=True)
    for config_name in ("mini_textbased.yaml", "default.yaml"):
        with tempfile.TemporaryDirectory(prefix="mini-swe-agent-example-") as tmp:
            for name, text in PROJECT.items():
                (Path(tmp) / name).write_text(text)
            print(run(config_name, args.out, Path(tmp)))


if __name__ == "__main__":
    main()
