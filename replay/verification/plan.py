"""Which of a run's pairs can be checked, and the branches that check them (no container, no student).

A pair is the run's `pair` verdict at a state (verdicts.jsonl; its consensus is `chosen`). It can be
checked when its state comes from a rollout of the mini agent found in `--rollouts` (by its rollout id)
whose instance row `--instances` holds; else it is `unverifiable`, with one of `REASONS`. Each checkable
pair gets 2 × N branch jobs: the consensus and the student's own reply, N samples each, every job keyed
by what it depends on (the rollout, the state, the action, the sample, the turns allowed, the student
and its sampling) so that a rerun finds what it graded already.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from collect.branch import Arm, BranchJob
from collect.instances import load_instances
from consensus.canonical import clean_action
from ingestion.rollout_format import RolloutHeader, TurnRecord
from ingestion.rollouts import SOURCE, is_rollout_file, read_rollout
from ingestion.schema import Action, ReplayError
from ingestion.stats import IngestStats
from ingestion.store import state_rows

REASONS = {
    "no_environment": "the state does not come from a collected rollout (a session, another agent's log): "
                      "there is no environment to restore",
    "claude_code_agent": "a rollout of the claude-code agent: its CLI resumes a session only with a new "
                         "prompt (`--resume`, `--resume-session-at`), so the state's own request is never "
                         "sent again, and the effects of its own tools (Bash included) cannot be restored "
                         "outside it",
    "rollout_missing": "no rollout with the state's rollout id under --rollouts",
    "turn_missing": "the rollout holds no such turn (a different or truncated file)",
    "rollout_changed": "the rollout's turn is not the student action the run paired (another file under "
                       "the same id)",
    "instance_missing": "--instances holds no row with the rollout's instance_id",
    "branch_failed": "an action had no graded branch (the student, the engine or the harness failed; a "
                     "rerun tries those again)",
}
ARMS: tuple[Arm, Arm] = ("chosen", "rejected")


class PlanError(ReplayError):
    """The run or the rollouts cannot be read as they are."""


@dataclass
class Pair:
    """One pair of the run and how it is checked."""

    state_id: str
    reason: str | None = None              # why it cannot be checked (a key of REASONS); None: it can
    rollout_id: str | None = None
    turn: int = 0
    student: Action | None = None          # the student's action as the run stored it (redacted)
    estimate: tuple[int, int] = (0, 0)     # student tokens: as long as the rollout went on, at most
    jobs: dict[Arm, list[BranchJob]] = field(default_factory=dict)


@dataclass
class Settings:
    """The branches' own settings, from the command line."""

    samples: int = 4
    max_turns: int | None = None           # None: what the rollout had left of its own --max-turns
    student_url: str | None = None         # None: each rollout's own
    api_key: str = "EMPTY"
    command_timeout: int = 120
    output_limit: int = 20_000
    eval_timeout: int = 1800
    mem_limit: str = "8g"
    cpus: float = 2.0


def index_rollouts(folder: Path) -> dict[str, Path]:
    """Rollout id → file, for every mini-agent rollout under `folder` (headers only are read)."""
    if not folder.is_dir():
        raise PlanError(f"--rollouts {folder}: no such folder (give the --out folder of a collect.run)")
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob("*")):
        if not is_rollout_file(path) or not path.is_file():
            continue
        with open(path, "rb") as handle:
            first = handle.readline()
        try:
            header = RolloutHeader.model_validate(orjson.loads(first))
        except (orjson.JSONDecodeError, ValueError):
            continue
        found.setdefault(header.rollout_id, path)
    return found


def pair_actions(run: Path) -> dict[str, Action]:
    """State id → the consensus of each `pair` verdict (verdicts.jsonl), as the run's rows show it."""
    path = run / "verdicts.jsonl"
    if not path.is_file():
        raise PlanError(f"{path} not found: --run must be the --out folder of a replay.run that asked "
                        "teachers")
    pairs = {}
    with open(path, "rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = orjson.loads(line)
            result = record.get("result") or {}
            if record.get("verdict") == "pair" and result.get("action") is not None:
                pairs[record["state_id"]] = Action.model_validate(result["action"])
    return pairs


def wire_message(action: Action) -> dict[str, Any]:
    """An action as the assistant message a student would have sent (arguments as JSON text).

    >>> from ingestion.schema import ToolCall
    >>> wire_message(Action(tool_calls=[ToolCall(id="c", name="bash", arguments={"command": "ls"})]))
    {'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c', 'type': 'function', \
'function': {'name': 'bash', 'arguments': '{"command": "ls"}'}}]}
    """
    message: dict[str, Any] = {"role": "assistant", "content": action.content}
    if action.tool_calls:
        message["tool_calls"] = [{"id": call.id, "type": "function",
                                  "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
                                 for call in action.tool_calls]
    return message


def branch_key(*parts: Any) -> str:
    """A stable key of what a branch depends on.

    >>> branch_key("r", 1, {"b": 1, "a": 2}) == branch_key("r", 1, {"a": 2, "b": 1})
    True
    """
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def plan_pairs(run: Path, rollouts: Path, instances: Path | None, settings: Settings,
               only: set[str] | None = None) -> list[Pair]:
    """Every pair of the run (among the states `only` names), checkable or not (with why), and the jobs
    of those that are."""
    actions = {state_id: action for state_id, action in pair_actions(run).items()
               if only is None or state_id in only}
    files = index_rollouts(rollouts)
    rows = _instance_rows(instances) if instances is not None else {}
    pairs: list[Pair] = []
    read: dict[str, tuple[RolloutHeader | None, list[TurnRecord]]] = {}
    for state in _pair_states(run, actions):
        pair = Pair(state_id=state["state_id"], student=Action.model_validate(state["student_action"]))
        pairs.append(pair)
        metadata = state.get("metadata") or {}
        if state.get("source") != SOURCE:
            pair.reason = "no_environment"
            continue
        if metadata.get("agent") == "claude-code":
            pair.reason = "claude_code_agent"
            continue
        rollout_id = metadata.get("rollout_id")
        if rollout_id not in files:
            pair.reason = "rollout_missing"
            continue
        if rollout_id not in read:
            header, turns, _ = read_rollout(files[rollout_id], IngestStats())
            read[rollout_id] = header, turns
        header, turns = read[rollout_id]
        pair.rollout_id, pair.turn = rollout_id, int(state["turn"])
        pair.reason = _problem(header, turns, pair, rows)
        if pair.reason is None:
            clean = clean_action(actions[pair.state_id], metadata.get("cwd"))
            _add_jobs(pair, header, turns, wire_message(clean), rows[header.instance_id], settings)
    return pairs


def _pair_states(run: Path, actions: Mapping[str, Action]) -> Iterator[dict[str, Any]]:
    for row in state_rows(run):
        if row.get("state_id") in actions:
            yield row


def _instance_rows(path: Path) -> dict[str, dict[str, Any]]:
    from collect.config import CollectError

    try:
        rows = load_instances(path)
    except CollectError as exc:
        raise PlanError(str(exc)) from None
    return {row["instance_id"]: row for row in rows if isinstance(row, dict) and isinstance(
        row.get("instance_id"), str)}


def _problem(header: RolloutHeader | None, turns: list[TurnRecord], pair: Pair,
             rows: Mapping[str, Any]) -> str | None:
    by_turn = {turn.turn: turn for turn in turns}
    if header is None or pair.turn not in by_turn or any(n not in by_turn for n in range(pair.turn)):
        return "turn_missing"
    recorded = [(call.get("function") or {}).get("name") for call in
                by_turn[pair.turn].response.get("tool_calls") or []]
    if pair.student is None or recorded != [call.name for call in pair.student.tool_calls]:
        return "rollout_changed"
    if header.instance_id not in rows:
        return "instance_missing"
    return None


def _add_jobs(pair: Pair, header: RolloutHeader, turns: list[TurnRecord], chosen: dict[str, Any],
              row: dict[str, Any], settings: Settings) -> None:
    by_turn = {turn.turn: turn for turn in turns}
    state = by_turn[pair.turn]
    history = [by_turn[n].model_copy(update={"messages": []}) for n in range(pair.turn)]  # calls only
    left = max(header.max_turns - pair.turn - 1, 0)       # what the rollout had left of its own budget
    max_turns = settings.max_turns if settings.max_turns is not None else left
    config = _config(header, settings, max_turns)
    student = {key: config.get(key) for key in ("student_model", "student_provider", "temperature", "top_p",
                                                  "max_tokens", "reasoning_echo")}
    limits = {key: config[key] for key in ("command_timeout", "output_limit")}
    state_key = branch_key(header.rollout_id, pair.turn, limits)
    for arm, action in (("chosen", chosen), ("rejected", None)):
        pair.jobs[arm] = [BranchJob(
            state_key=state_key,
            key=branch_key(header.rollout_id, pair.turn, action or "student", sample, max_turns, student,
                           limits),
            rollout_id=header.rollout_id, instance_id=header.instance_id, turn=pair.turn, arm=arm,
            sample=sample, image=header.image, base_commit=header.base_commit, tools=header.tools,
            history=history, state=state, action=action, row=row, max_turns=max_turns, config=config)
            for sample in range(settings.samples)]
    pair.estimate = estimate_tokens(turns, pair.turn, max_turns)


def _config(header: RolloutHeader, settings: Settings, max_turns: int) -> dict[str, Any]:
    """The CollectConfig (as JSON) a branch of this rollout runs with: its student, sampling and echo."""
    sampling = header.sampling or {}
    return {"instances": "-", "out": "-", "student_url": settings.student_url or header.student_url,
            "student_model": header.student_model, "student_provider": header.student_provider,
            "api_key": settings.api_key, "max_turns": max(max_turns, 1), "evaluate": True,
            "temperature": sampling.get("temperature"), "top_p": sampling.get("top_p"),
            "max_tokens": sampling.get("max_tokens"),
            "reasoning_echo": header.reasoning_echo if header.reasoning_echo in ("field", "inline", "none")
            else "auto", "command_timeout": settings.command_timeout, "output_limit": settings.output_limit,
            "eval_timeout": settings.eval_timeout, "mem_limit": settings.mem_limit, "cpus": settings.cpus,
            **({"logprobs_mode": header.logprobs_mode} if header.logprobs_mode else {})}


def estimate_tokens(turns: list[TurnRecord], at: int, max_turns: int) -> tuple[int, int]:
    """Student tokens of one branch: (as many turns as the rollout went on after the state, `max_turns`).

    Each turn's prompt is the state's prompt grown by the rollout's mean growth per turn, plus its mean
    completion; the rollout's own usage (or token ids) gives the figures.

    >>> usage = lambda p, c: {"prompt_tokens": p, "completion_tokens": c}
    >>> turns = [TurnRecord(turn=n, messages=[], response={}, usage=usage(100 + 50 * n, 20))
    ...          for n in range(4)]
    >>> estimate_tokens(turns, 1, 5)
    (490, 1600)
    """
    sizes = [(_prompt_tokens(turn), _completion_tokens(turn)) for turn in turns]
    if not sizes or at >= len(sizes):
        return 0, 0
    growth = (sizes[-1][0] - sizes[0][0]) / max(len(sizes) - 1, 1)
    completion = sum(c for _, c in sizes) / len(sizes)
    start = sizes[at][0] + growth

    def over(n: int) -> int:
        return int(sum(start + growth * step + completion for step in range(n)))

    return over(min(len(sizes) - at - 1, max_turns)), over(max_turns)


def _prompt_tokens(turn: TurnRecord) -> int:
    usage = turn.usage or {}
    return int(usage.get("prompt_tokens") or len(turn.prompt_token_ids or ()))


def _completion_tokens(turn: TurnRecord) -> int:
    usage = turn.usage or {}
    return int(usage.get("completion_tokens") or len(turn.completion_token_ids or ()))
