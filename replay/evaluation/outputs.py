"""`OUT/eval/`: `eval.json` (every figure), `eval.md` (the tables), `eval.png` (the plot) and
`answers.jsonl` (each model's answer and scores per state, redacted as the pool redacts teachers').

Written into a hidden folder beside `OUT/eval` and swapped in whole (`replay.rundir.files.replace_dir`):
a failed or interrupted eval leaves the previous one, and every other file of the run, as it was.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from replay.evaluation.results import Evaluation
from replay.evaluation.scoring import METRICS
from replay.evaluation.statistics import MIN_TRACES, Interval
from replay.rundir.files import replace_dir, temp_path, write_json, write_jsonl, write_text

EVAL_DIR = "eval"
JSON_FILE, MARKDOWN_FILE, PLOT_FILE, ANSWERS_FILE = "eval.json", "eval.md", "eval.png", "answers.jsonl"
LABELS = {"consensus_exact": "consensus, exact", "consensus_intent": "consensus, intent",
          "student_exact": "repeats student, exact", "student_intent": "repeats student, intent",
          "recovery_exact": "student's recovery, exact", "recovery_intent": "student's recovery, intent",
          "valid": "valid (prose counts)", "tool_call": "valid tool call"}


def cell(iv: Interval, signed: bool = False) -> str:
    """A rate as the table shows it: value [low, high] (n), and the traces when under `MIN_TRACES`.

    >>> cell(Interval(n=200, traces=20, value=0.9, low=0.86, high=0.94))
    '0.900 [0.860, 0.940] n=200'
    >>> cell(Interval(n=5, traces=2, value=-0.2, low=-0.9, high=0.5, method="t"), signed=True)
    '-0.200 [-0.900, +0.500] n=5 (2 traces: t interval, unreliable)'
    >>> cell(Interval())
    'n/a (n=0)'
    """
    if iv.value is None or iv.low is None or iv.high is None:
        return "n/a (n=0)"
    fmt = "{:+.3f}" if signed else "{:.3f}"
    few = f" ({iv.traces} traces: t interval, unreliable)" if iv.method == "t" else ""
    return f"{fmt.format(iv.value)} [{fmt.format(iv.low)}, {fmt.format(iv.high)}] n={iv.n}{few}"


def markdown_text(evaluation: Evaluation) -> str:
    """eval.md: the rates per model, the paired differences, and what the figures mean."""
    held = evaluation.held_out
    names = [m.name for m in evaluation.models]
    lines = [f"# Evaluation against `{evaluation.run}`", "",
             f"Held-out states: {held['states']} in {held['traces']} traces — {held['how']}.", "",
             *([f"**Warning: {evaluation.interval_warning}**", ""] if evaluation.interval_warning else []),
             "| figure | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for metric in METRICS:
        lines.append(f"| {LABELS[metric]} | " + " | ".join(cell(m.rates[metric]) for m in evaluation.models)
                     + " |")
    lines.append("| answered / failed calls | " + " | ".join(f"{m.answered} / {m.failed}"
                                                               for m in evaluation.models) + " |")
    lines.append("| invalid answers | " + " | ".join(_counts(m.invalid) for m in evaluation.models) + " |")
    lines.append("| USD (calls made / cached) | " + " | ".join(
        f"{m.calls.get('cost_usd', 0.0):.4f} ({m.calls.get('made', 0)} / {m.calls.get('cached', 0)})"
        for m in evaluation.models) + " |")
    for diff in evaluation.differences:
        lines += ["", f"## {diff.second} − {diff.first}, paired on the same states", "",
                  "| figure | difference [95% interval] | excludes 0 |", "|---|---|---|"]
        lines += [f"| {LABELS[metric]} | {cell(diff.rates[metric], signed=True)} | "
                  f"{'yes' if diff.rates[metric].excludes_zero else 'no'} |" for metric in METRICS]
    boot = evaluation.bootstrap
    lines += ["", "## What the figures mean", "",
              f"Each rate is over the held-out states where it applies (n), with a {boot['level']:.0%} "
              f"interval from {boot['resamples']} bootstrap resamples of whole traces (seed "
              f"{boot.get('seed', 0)}): states of one trace are not independent. Over fewer than "
              f"{boot.get('min_traces', MIN_TRACES)} traces the bootstrap runs far too narrow, so such a "
              "figure takes a cluster t interval (Student's t, traces - 1 degrees of freedom) and is marked "
              "unreliable. A difference is the later model's rate minus the earlier one's on the states both "
              "were scored on.", ""]
    lines += [f"- **{LABELS[metric]}**: {evaluation.metrics[metric]}." for metric in METRICS]
    lines += ["", "Agreement with the consensus is agreement with these teachers, not correctness; repeating "
              "the student is what an untrained student does; the recovery figure is measured against what "
              "the student itself did next, one correct answer among many. An invalid answer scores 0 on "
              "every comparison; a failed call is in no rate.", ""]
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "0"


def write_plot(evaluation: Evaluation, path: Path) -> None:
    """eval.png: every rate per model with its interval; beside it the paired differences around 0."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never a display
    import matplotlib.pyplot as plt

    panels = 2 if evaluation.differences else 1
    height = max(3.5, 0.45 * len(METRICS) * max(1, len(evaluation.models)) ** 0.5 + 1.5)
    fig, axes = plt.subplots(1, panels, figsize=(7 * panels, height), layout="constrained", squeeze=False)
    _dots(axes[0][0], [(m.name, m.rates) for m in evaluation.models], "rate (95% interval, traces resampled)",
          "o", 0)
    axes[0][0].set_xlim(-0.02, 1.02)
    if evaluation.differences:
        ax = axes[0][1]
        _dots(ax, [(f"{d.second} − {d.first}", d.rates) for d in evaluation.differences],
              "paired difference (95% interval)", "s", len(evaluation.models))
        ax.axvline(0, color="#555555", linewidth=1)
        ax.set_yticklabels([])
    held = evaluation.held_out
    unreliable = "" if evaluation.intervals_reliable else " — intervals unreliable (too few traces)"
    fig.suptitle(f"{held['states']} held-out states in {held['traces']} traces{unreliable}", fontsize=12)
    tmp = temp_path(path).with_suffix(".png")  # savefig picks the format from the suffix
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def _dots(ax: Any, series: list[tuple[str, dict[str, Interval]]], label: str, marker: str,
          first: int) -> None:
    """One row per figure, a dot per series with its interval; colours from `first` on (a difference is
    never drawn in a model's colour)."""
    import matplotlib

    colours = matplotlib.colormaps["tab10"].colors
    step = 0.7 / max(len(series), 1)
    for k, (name, rates) in enumerate(series):
        ys, xs, lows, highs = [], [], [], []
        for row, metric in enumerate(METRICS):
            iv = rates[metric]
            if iv.value is None or iv.low is None or iv.high is None:
                continue
            ys.append(row - 0.35 + step * (k + 0.5))
            xs.append(iv.value)
            lows.append(iv.value - iv.low)
            highs.append(iv.high - iv.value)
        ax.errorbar(xs, ys, xerr=[lows, highs], fmt=marker, capsize=3, label=name,
                    color=colours[(first + k) % len(colours)])
    ax.set_yticks(range(len(METRICS)), [LABELS[m] for m in METRICS])
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(label)
    ax.legend(fontsize=8, loc="best")


def write_outputs(evaluation: Evaluation, records: Iterable[dict[str, Any]], target: Path) -> None:
    """Every file into a fresh folder beside `target`, then swapped in for it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        work.mkdir()
        write_jsonl(work / ANSWERS_FILE, records)
        write_json(work / JSON_FILE, evaluation.model_dump(mode="json"))
        write_text(work / MARKDOWN_FILE, markdown_text(evaluation))
        write_plot(evaluation, work / PLOT_FILE)
        replace_dir(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
