"""One branch of a collected rollout: its state restored in a fresh container, an action taken there, the
same student and agent going on from it, the harness's reward (issue #37, the environment's side).

A branch, in order:
1. a fresh container of the rollout's image: no network, the run's labels, the instance's future
   scrubbed from /testbed exactly as before a rollout (collect/answer_key.py); a failed check ends it;
2. the restore: the rollout's own tool calls of the turns before the state, run again in order, each
   observation compared with the recorded one (output and exit code; a difference is a mismatch, unless
   it is in text that differs at every run: durations, clock times, dates, `stable`);
3. the action as the student's turn at the state: the teachers' consensus, or the student's own reply
   as recorded (`BranchJob.action` None), its calls run by the agent's tools;
4. the mini agent's loop (collect/agent.py, unchanged) from the state's own request messages with the
   action appended, asking the same student with the rollout's sampling, up to `max_turns` more turns;
5. the patch, graded by the swebench harness on the image (collect/evaluate.py): the branch's reward.

Restored by replaying the rollout's calls, not from snapshots taken while collecting (measured in
bench/verify_restore.py): every rollout already collected can be branched, each restore checks itself
against the record, and a job carries everything it needs to any Ray node (no image to ship). The first
branch of a state on an engine commits what it restored, and the state's other branches there start
from that image (collect/snapshot.py): one replay per state, not one per branch.
Must not: decide what the rewards mean (`replay.verification`), write outputs (the caller does).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from collect.agent import run_agent
from collect.answer_key import scrub
from collect.config import AgentSpec, CollectConfig, load_agent_spec
from collect.evaluate import grade_patch
from collect.reply import StudentReply
from collect.runtime import ContainerTracker, ImageMissing, Interrupted, Runtime, RuntimeFailure, ensure_image
from collect.snapshot import find_snapshot, state_lock, take_snapshot
from collect.student import Student
from collect.tools import Workspace, execute
from configs import config_path
from ingestion.rollout_format import GRADED, TurnRecord

log = logging.getLogger("collect")
Arm = Literal["chosen", "rejected"]
# Feedback the agent gave about a reply it could not act on: that turn's calls never ran.
NOT_RUN = ("truncated_reply", "unparsed_tool_call")
SHOWN = 300                                # characters of each side of a mismatch kept for the report


class BranchJob(BaseModel):
    """Everything one branch needs, so that it runs on any node (nothing is read from the driver's disk)."""

    key: str                               # stable across runs: a rerun skips a key already graded
    state_key: str                         # the state restored (the branches of a state share it)
    rollout_id: str
    instance_id: str
    turn: int                              # the state: the rollout's turn whose reply the action replaces
    arm: Arm
    sample: int
    image: str
    base_commit: str | None = None
    tools: list[dict[str, Any]]            # the rollout's tool schemas (its header's)
    history: list[TurnRecord]              # the turns before the state (calls and observations)
    state: TurnRecord                      # the state's turn: its request messages, the student's reply
    action: dict[str, Any] | None = None   # the assistant message to take; None: the student's own reply
    row: dict[str, Any]                    # the SWE-bench instance (the harness grades with it)
    max_turns: int = Field(ge=0)           # student turns after the action
    config: dict[str, Any]                 # CollectConfig as JSON: the student, its sampling, the limits


class Mismatch(BaseModel):
    turn: int
    tool_call_id: str | None
    name: str
    recorded: str                          # head of the recorded output (with its exit code)
    replayed: str


class BranchResult(BaseModel):
    key: str
    reward: float | None = None            # 1.0 resolved / 0.0 not; None: not graded (see error)
    resolved: bool | None = None
    exit_status: str | None = None         # how the continuation ended, as a rollout's final record says
    turns: int = 0                         # the student's turns after the action
    prompt_tokens: int = 0                 # the student's, over those turns
    completion_tokens: int = 0
    restored: str | None = None            # replay (this branch replayed the rollout) or snapshot
    replayed: int = 0                      # recorded tool calls run again to restore the state
    mismatches: list[Mismatch] = Field(default_factory=list)
    volatile: int = 0                      # replayed observations that differed in volatile text only
    error_kind: str | None = None          # image_not_found, container_error, answer_key_visible,
    error: str | None = None               # student_error, runtime_error, evaluation_error, interrupted, ...
    elapsed_s: float = 0.0
    node: str | None = None                # --ray: where it ran

    @property
    def graded(self) -> bool:
        return self.reward is not None


@dataclass
class BranchContext:
    """What the branches of one process share: the engine, the run's labels, its containers, its students."""

    client: Any
    run_id: str
    log_dir: Path                          # the harness's logs (collect.evaluate.use_log_dir is set to it)
    labels: dict[str, str] = field(default_factory=dict)
    attempt: str = ""                      # container name suffix of a task Ray may run again
    tracker: ContainerTracker = field(default_factory=ContainerTracker)
    stop: threading.Event = field(default_factory=threading.Event)
    _students: dict[str, Student] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def student(self, config: CollectConfig, think_tags: tuple[str, str]) -> Student:
        """One Student per distinct server and sampling: its backend remembers what the server refused."""
        key = config.model_dump_json(include={"student_url", "student_model", "student_provider", "api_key",
                                              "temperature", "top_p", "max_tokens", "reasoning_echo"})
        with self._lock:
            if key not in self._students:
                self._students[key] = Student(config, think_tags=think_tags)
            return self._students[key]


class StateSpec(AgentSpec):
    """The agent's spec with the state's own request as the conversation it starts from."""

    start: list[dict[str, Any]]

    def first_messages(self, problem_statement: str) -> list[dict[str, Any]]:
        return list(self.start)


class _Forced:
    """The student, but its first reply is the branch's action (every other attribute is the student's)."""

    def __init__(self, student: Any, first: StudentReply) -> None:
        self._student, self._first = student, first

    def __getattr__(self, name: str) -> Any:
        return getattr(self._student, name)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> StudentReply:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        return self._student.complete(messages, tools)


class _Turns:
    """A writer that keeps the branch's turn records in memory (the caller keeps only their outcome)."""

    def __init__(self) -> None:
        self.records: list[TurnRecord] = []

    def write(self, record: Any) -> None:
        if isinstance(record, TurnRecord):
            self.records.append(record)


def forced_reply(job: BranchJob) -> StudentReply:
    """The action as the reply the agent acts on: the consensus message, or the student's recorded reply
    with its reasoning and token ids (so the next prompt can be checked to extend it).

    >>> state = TurnRecord(turn=1, messages=[], response={"role": "assistant", "content": "done"})
    >>> job = BranchJob(key="k", state_key="s", rollout_id="r", instance_id="i", turn=1, arm="chosen",
    ...     sample=0,
    ...     image="x", tools=[], history=[], state=state, row={}, max_turns=1, config={},
    ...     action={"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
    ...             "function": {"name": "bash", "arguments": "{}"}}]})
    >>> forced_reply(job).finish_reason, forced_reply(job.model_copy(update={"action": None})).message
    ('tool_calls', {'role': 'assistant', 'content': 'done'})
    """
    if job.action is not None:
        finish = "tool_calls" if job.action.get("tool_calls") else "stop"
        return StudentReply(message=dict(job.action), finish_reason=finish)
    turn = job.state
    return StudentReply(message=dict(turn.response), reasoning=turn.reasoning,
                        reasoning_field=turn.reasoning_field, finish_reason=turn.finish_reason,
                        prompt_token_ids=turn.prompt_token_ids,
                        completion_token_ids=turn.completion_token_ids, logprobs=turn.logprobs,
                        tokens=turn.tokens, usage=turn.usage)


@cache
def _volatile() -> list[re.Pattern[str]]:
    rules = tomllib.loads(config_path("volatile_output.toml").read_text(encoding="utf-8"))
    return [re.compile(pattern) for pattern in rules["patterns"]]


def stable(text: str) -> str:
    """A tool's output with what differs from one run of a command to the next masked: durations, clock
    times, dates, addresses (configs/volatile_output.toml).

    >>> stable("1 passed in 0.05s"), stable("drwxr-xr-x 2 root root 4096 Nov 26 19:15 notes")
    ('1 passed in ~', 'drwxr-xr-x 2 root root 4096 ~ ~ notes')
    """
    for pattern in _volatile():
        text = pattern.sub("~", text)
    return text


def replay_history(workspace: Workspace, turns: list[TurnRecord]) -> tuple[int, list[Mismatch], int]:
    """Run the recorded calls of `turns` again, in order; (calls run, the observations that differ, those
    that differ in volatile text only: `stable`).

    A turn whose reply the agent could not act on (cut, or a call left as text) ran nothing; a call
    without an observation was never run (the rollout stopped there)."""
    replayed, mismatches, volatile = 0, [], 0
    for turn in turns:
        if any(seen.error in NOT_RUN for seen in turn.observations):
            continue
        recorded = {seen.tool_call_id: seen for seen in turn.observations if seen.tool_call_id}
        for call in turn.response.get("tool_calls") or []:
            seen = recorded.get(call.get("id"))
            if seen is None:
                continue
            got = execute(workspace, call)
            replayed += 1
            if (got.output, got.exit_code) == (seen.output, seen.exit_code):
                continue
            if (stable(got.output), got.exit_code) == (stable(seen.output), seen.exit_code):
                volatile += 1
            else:
                mismatches.append(Mismatch(
                    turn=turn.turn, tool_call_id=seen.tool_call_id, name=seen.name,
                    recorded=f"{seen.output[:SHOWN]} (exit {seen.exit_code})",
                    replayed=f"{got.output[:SHOWN]} (exit {got.exit_code})"))
    return replayed, mismatches, volatile


def run_branch(job: BranchJob, context: BranchContext) -> BranchResult:
    """One branch, start to finish; any failure becomes its result (error_kind), never the run's."""
    started = time.monotonic()
    result = BranchResult(key=job.key)
    try:
        _branch(job, context, result)
    except Interrupted:
        result.reward, result.error_kind, result.error = None, "interrupted", "interrupted"
    except Exception as exc:  # a bug or an engine failure on one branch must not stop the others
        log.exception("%s turn %d (%s): unexpected error", job.rollout_id, job.turn, job.arm)
        result.reward, result.error_kind, result.error = None, "internal_error", repr(exc)[:500]
    result.elapsed_s = round(time.monotonic() - started, 3)
    return result


def _branch(job: BranchJob, context: BranchContext, result: BranchResult) -> None:
    config = CollectConfig.model_validate(job.config)
    runtime = Runtime(context.client, config, context.tracker)
    try:
        with state_lock(context.run_id, job.state_key):   # the state's other branches wait for its restore
            restored = _restore(job, context, config, runtime, result)
        patch = _act(job, context, config, runtime, result) if restored else None
    finally:
        runtime.remove()
    if patch is None or context.stop.is_set():
        return
    grade = grade_patch(context.client, job.row, job.image, patch, config.student_model,
                        f"{context.run_id}.{job.key[:12]}", config.eval_timeout, context.log_dir)
    if context.stop.is_set():
        raise Interrupted()
    result.reward, result.resolved = grade.reward, grade.resolved
    if grade.reward is None:
        result.error_kind, result.error = "evaluation_error", grade.error


def _restore(job: BranchJob, context: BranchContext, config: CollectConfig, runtime: Runtime,
             result: BranchResult) -> bool:
    """Steps 1-2: a container of the state, from this engine's snapshot of it or by replaying the
    rollout (then kept as the snapshot); False when it failed (the result says why)."""
    if context.stop.is_set():              # stopped while it waited for the state's lock: no new container
        raise Interrupted()
    snapshot = find_snapshot(context.client, context.run_id, job.state_key)
    try:
        if snapshot is None:
            ensure_image(context.client, job.image, config.pull)
        runtime.start(snapshot or job.image, context.run_id, job.instance_id, labels=context.labels,
                      attempt=f".{job.key[:12]}{context.attempt}")
    except ImageMissing as exc:
        result.error_kind, result.error = "image_not_found", str(exc)
        return False
    except RuntimeFailure as exc:
        result.error_kind, result.error = "container_error", str(exc)
        return False
    if snapshot is not None:               # scrubbed and replayed by the branch that committed it
        result.restored = "snapshot"
        return True
    check = scrub(runtime, job.base_commit, "none")
    if not check.ok:
        result.error_kind, result.error = "answer_key_visible", f"{check.error} (git history of /testbed)"
        return False
    try:
        result.replayed, result.mismatches, result.volatile = replay_history(runtime, job.history)
    except RuntimeFailure as exc:
        result.error_kind, result.error = "runtime_error", f"restoring the state: {exc}"
        return False
    result.restored = "replay"
    take_snapshot(runtime.container, context.run_id, job.state_key)
    return True


def _act(job: BranchJob, context: BranchContext, config: CollectConfig, runtime: Runtime,
         result: BranchResult) -> str | None:
    """Steps 3-4 in the restored container; the patch to grade, or None (the result says why)."""
    spec = load_agent_spec()
    state_spec = StateSpec(**{**spec.model_dump(), "tools": job.tools}, start=job.state.messages)
    student = _Forced(context.student(config, spec.think_tags), forced_reply(job))
    turns = _Turns()
    ended = run_agent(student, runtime, state_spec, "", turns, job.max_turns + 1, context.stop)
    result.exit_status, result.turns = ended.exit_status, max(ended.turns - 1, 0)
    for record in turns.records[1:]:       # the action's own turn cost the student nothing here
        usage = record.usage or {}
        result.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        result.completion_tokens += int(usage.get("completion_tokens") or 0)
    if ended.exit_status not in GRADED:
        result.error_kind, result.error = ended.exit_status, ended.error or ended.exit_status
        return None
    try:
        return runtime.diff()
    except RuntimeFailure as exc:
        result.error_kind, result.error = "runtime_error", str(exc)
        return None
