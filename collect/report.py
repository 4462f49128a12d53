"""What a run did, per instance and in total; written as DIR/report.json."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, Field

from collect.probe import ServerInfo

ErrorKind = str   # invalid_instance, image_not_found, container_error, student_error, runtime_error,
                  # evaluation_error, interrupted, internal_error


class InstanceOutcome(BaseModel):
    instance_id: str
    sample: int = 0                        # which of the instance's rollouts (--samples)
    rollout_file: str | None = None        # relative to DIR; None when no container was started
    exit_status: str | None = None
    turns: int = 0
    turns_with_token_ids: int = 0
    prefix_breaks: int = 0                 # turns whose prompt_token_ids do not extend the last turn's
    prefix_break_reasons: dict[str, int] = Field(default_factory=dict)   # those turns by PrefixBreak.reason
    reward: float | None = None
    resolved: bool | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    elapsed_s: float = 0.0
    node: str | None = None                # --ray: the node it ran on; None: this machine
    resumed: bool = False                  # --ray: found finished in DIR by a rerun, not run again


class RunReport(BaseModel):
    run_id: str
    student_model: str
    student_url: str | None
    student_provider: str | None = None
    sampling: dict[str, float | int] = Field(default_factory=dict)   # as sent; absent: the server's
    seed: int | None = None                # --seed: the base of the rollouts' seeds (header `sampling`)
    logprobs_mode: str | None = None       # the server's, as declared by --logprobs-mode
    evaluate: bool
    started_at: str
    finished_at: str | None = None
    interrupted: bool = False
    instances: int = 0                     # rows in the instances file
    rollouts: int = 0                      # rollout files written
    ok: int = 0                            # rollouts that ended without an error
    turns: int = 0
    turns_with_token_ids: int = 0
    # Per student server (its URL, else provider/model): turns whose prompt_token_ids do not start with
    # the previous turn's prompt + completion. A trainer that scores a rollout as one sequence must know.
    prefix_breaks: dict[str, int] = Field(default_factory=dict)
    # The same turns by why (ingestion/rollout_format.py PrefixBreak): history_rewritten, rerendered,
    # retokenized, unknown.
    prefix_break_reasons: dict[str, int] = Field(default_factory=dict)
    exit_status: dict[str, int] = Field(default_factory=dict)
    errors: dict[ErrorKind, int] = Field(default_factory=dict)
    evaluated: int = 0
    resolved: int = 0
    servers: list[ServerInfo] = Field(default_factory=list)   # each student server: probe, token extension
    outcomes: list[InstanceOutcome] = Field(default_factory=list)
    ray: dict[str, Any] | None = None      # --ray: the address, its docker capacity, nodes lost
    started: int | None = None             # --ray: rollouts run by this run (not resumed)
    resumed: int = 0                       # --ray: finished (instance, sample)s a rerun skipped
    nodes: dict[str, dict[str, int]] = Field(default_factory=dict)   # --ray: per node: rollouts, ok

    def add(self, outcome: InstanceOutcome) -> None:
        """Fold one instance in (called from one thread at a time)."""
        self.outcomes.append(outcome)
        self.rollouts += outcome.rollout_file is not None
        self.ok += outcome.error_kind is None
        self.turns += outcome.turns
        self.turns_with_token_ids += outcome.turns_with_token_ids
        if outcome.rollout_file is not None:
            server = self.student_url or f"{self.student_provider or ''}/{self.student_model}"
            self.prefix_breaks[server] = self.prefix_breaks.get(server, 0) + outcome.prefix_breaks
            self.prefix_break_reasons = dict(Counter(self.prefix_break_reasons)
                                             + Counter(outcome.prefix_break_reasons))
        if outcome.exit_status:
            self.exit_status = dict(Counter(self.exit_status) + Counter([outcome.exit_status]))
        if outcome.error_kind:
            self.errors = dict(Counter(self.errors) + Counter([outcome.error_kind]))
        self.evaluated += outcome.reward is not None
        self.resolved += bool(outcome.resolved)
        if outcome.node:
            counts = self.nodes.setdefault(outcome.node, {"rollouts": 0, "ok": 0})
            counts["rollouts"] += outcome.rollout_file is not None
            counts["ok"] += outcome.error_kind is None

    def summary(self) -> str:
        """One line for the terminal.

        >>> RunReport(run_id="r", student_model="m", student_url="u", evaluate=False, started_at="t",
        ...           instances=2, rollouts=1, ok=1, turns=3, exit_status={"submitted": 1},
        ...           errors={"image_not_found": 1}).summary()
        '2 instances: 1 rollouts: 1 submitted, 3 turns (0 with token ids); errors: image_not_found=1'
        >>> RunReport(run_id="r", student_model="m", student_url="u", evaluate=False, started_at="t",
        ...           instances=4, rollouts=4, ok=4, exit_status={"context_overflow": 4}).summary()
        '4 instances: 4 rollouts: 4 context_overflow, 0 turns (0 with token ids); NO TURNS taken'
        """
        ends = sorted(self.exit_status.items(), key=lambda item: (-item[1], item[0]))
        text = (f"{self.instances} instances: {self.rollouts} rollouts"
                + (": " + ", ".join(f"{n} {status}" for status, n in ends) if ends else "")
                + f", {self.turns} turns ({self.turns_with_token_ids} with token ids)")
        if self.evaluate:
            text += f"; resolved {self.resolved}/{self.evaluated} evaluated"
        if broken := sum(self.prefix_breaks.values()):
            why = ", ".join(f"{reason}={n}" for reason, n in sorted(self.prefix_break_reasons.items()))
            text += f"; {broken} turns whose prompt does not extend the last (prefix_breaks"
            text += f": {why})" if why else ")"
        if self.errors:
            text += "; errors: " + ", ".join(f"{kind}={n}" for kind, n in sorted(self.errors.items()))
        dropped = [server.url or server.model for server in self.servers if server.token_extension_dropped]
        if dropped:
            text += "; token ids refused by " + ", ".join(dropped)
        if self.empty:
            text += "; NO TURNS taken"
        return text + ("; INTERRUPTED" if self.interrupted else "")

    @property
    def empty(self) -> bool:
        """Rollouts ran (or were meant to) and not one of them took a turn: a run that did nothing, e.g.
        every rollout at `context_overflow` on turn 0 (a student served with too short a context)."""
        return self.instances > 0 and self.turns == 0 and not self.interrupted


def write_report(report: RunReport, path: Path) -> None:
    """Atomically: a reader never sees half a report."""
    outcomes = sorted(report.outcomes, key=lambda outcome: (outcome.instance_id, outcome.sample))
    data = report.model_copy(update={"outcomes": outcomes}).model_dump(mode="json")
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    os.replace(tmp, path)
