"""From scored answers to the evaluation's figures: per model each rate with its interval, and between
every two models the paired difference. Pure: answers and yardsticks in, pydantic models out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from pydantic import BaseModel, Field

from consensus.validity import invalid_reason
from ingestion.schema import Proposal
from replay.evaluation.scoring import METRICS, Scores, Yardstick, answered, score
from replay.evaluation.statistics import (
    LEVEL,
    MIN_TRACES,
    RESAMPLES,
    Interval,
    cluster_bootstrap,
    paired_difference,
)


class ModelEval(BaseModel):
    name: str
    model: str
    rates: dict[str, Interval]
    states: int = 0                  # held-out states asked
    answered: int = 0                # ... where the model answered (valid or not)
    failed: int = 0                  # ... where the call failed (network, budget): in no rate
    invalid: dict[str, int] = Field(default_factory=dict)   # why answers were invalid, by kind
    failures: dict[str, int] = Field(default_factory=dict)  # why calls failed, by kind
    calls: dict[str, Any] = Field(default_factory=dict)     # made, cached, failed, tokens, USD


class Difference(BaseModel):
    first: str
    second: str                      # every value is second - first, on the states both were scored on
    rates: dict[str, Interval]


class Evaluation(BaseModel):
    run: str
    command: str = ""
    held_out: dict[str, Any]         # choice, how, states, traces
    bootstrap: dict[str, Any] = Field(default_factory=lambda: {
        "resamples": RESAMPLES, "level": LEVEL, "resampled": "traces", "min_traces": MIN_TRACES,
        "under_min_traces": "cluster t interval"})
    intervals_reliable: bool = True  # False: fewer than MIN_TRACES held-out traces (interval_warning)
    interval_warning: str | None = None
    metrics: dict[str, str]          # name -> what it measures
    models: list[ModelEval]
    differences: list[Difference]
    verdicts_sha256: str = ""        # the run's verdicts.jsonl this was scored against


def invalid_kind(proposal: Proposal, stick: Yardstick) -> str | None:
    """Why an answered proposal is not a valid call (`invalid_tool_arguments`, `empty_response`,
    `unknown_tool`, `missing_argument`), None when it is one or there is no answer."""
    if not answered(proposal):
        return None
    if proposal.action is None:
        return (proposal.error or "unparsed").split(":", 1)[0]
    if not stick.tools:
        return None
    reason = invalid_reason(proposal.action, stick.tools)
    return reason.split(":", 1)[0] if reason else None


def score_all(answers: Mapping[str, Mapping[str, Proposal]],
              sticks: Sequence[Yardstick]) -> dict[str, dict[str, Scores]]:
    """Model name -> state id -> scores, for every state a model was asked at."""
    return {name: {s.state_id: score(by_state[s.state_id], s) for s in sticks if s.state_id in by_state}
            for name, by_state in answers.items()}


def per_metric(scores: Mapping[str, Scores], metric: str) -> dict[str, float]:
    """State id -> the 0/1 score of one metric, where it applies.

    >>> per_metric({"a": {"valid": 1}, "b": {"valid": None}}, "valid")
    {'a': 1.0}
    """
    return {state: float(value) for state, s in scores.items() if (value := s.get(metric)) is not None}


def model_eval(name: str, model: str, answers: Mapping[str, Proposal], scores: Mapping[str, Scores],
               sticks: Sequence[Yardstick], seed: int, calls: dict[str, Any]) -> ModelEval:
    trace_of = {s.state_id: s.trace_id for s in sticks}
    rates = {}
    for metric in METRICS:
        values = per_metric(scores, metric)
        ids = sorted(values)
        rates[metric] = cluster_bootstrap([values[i] for i in ids], [trace_of[i] for i in ids], seed=seed)
    invalid: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for stick in sticks:
        proposal = answers.get(stick.state_id)
        if proposal is None:
            continue
        if (kind := invalid_kind(proposal, stick)) is not None:
            invalid[kind] += 1
        elif not answered(proposal):
            failures[(proposal.error or "error").split(":", 1)[0]] += 1
    answered_n = sum(answered(p) for p in answers.values())
    return ModelEval(name=name, model=model, rates=rates, states=len(answers), answered=answered_n,
                     failed=len(answers) - answered_n, invalid=dict(sorted(invalid.items())),
                     failures=dict(sorted(failures.items())), calls=calls)


def differences(names: Sequence[str], scores: Mapping[str, Mapping[str, Scores]],
                sticks: Sequence[Yardstick], seed: int) -> list[Difference]:
    """Every pair of models in `--models` order: the later one minus the earlier one, metric by metric."""
    trace_of = {s.state_id: s.trace_id for s in sticks}
    out = []
    for first, second in combinations(names, 2):
        rates = {metric: paired_difference(per_metric(scores[first], metric),
                                           per_metric(scores[second], metric), trace_of, seed=seed)
                 for metric in METRICS}
        out.append(Difference(first=first, second=second, rates=rates))
    return out
