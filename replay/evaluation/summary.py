"""What `python -m replay.eval` prints: the dry run's plan, or the figures and where they were written."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from replay.evaluation.outputs import LABELS, cell
from replay.evaluation.scoring import METRICS
from replay.evaluation.statistics import interval_warning

if TYPE_CHECKING:
    from replay.evaluation.results import Evaluation
    from replay.evaluation.run import Plan


def plan_lines(plan: Plan) -> list[str]:
    """The dry run: held-out states, then per model its calls, those the cache holds, tokens and USD."""
    lines = [f"held-out states: {len(plan.held.states)} in {plan.traces} traces — {plan.held.how}",
             *([f"warning: {why}"] if (why := interval_warning(plan.traces)) else []),
             f"{'model':<20} {'calls':>7} {'cached':>7} {'prompt tokens':>14} {'USD':>10}  (low – high)"]
    calls = cached = 0
    usd = 0.0
    for name, row in plan.estimate.items():
        calls, cached, usd = calls + row["calls"], cached + row["cached"], usd + row["cost_usd"]
        lines.append(f"{name:<20} {row['calls']:>7} {row['cached']:>7} {row['prompt_tokens']:>14} "
                     f"{row['cost_usd']:>10.4f}  ({row['cost_usd_low']:.4f} – {row['cost_usd_high']:.4f})")
    lines.append(f"total: {calls} calls, {cached} of them in the cache (free), ~${usd:.4f}")
    lines += [f"note: {name} is priced at 0: {why}" for name, why in sorted(plan.unpriced.items())]
    return lines


def summary_lines(evaluation: Evaluation, out: Path) -> list[str]:
    """The rates per model and every paired difference, as the table in eval.md has them."""
    held = evaluation.held_out
    lines = [f"held-out states: {held['states']} in {held['traces']} traces — {held['how']}"]
    if evaluation.interval_warning:
        lines.append(f"warning: {evaluation.interval_warning}")
    for model in evaluation.models:
        calls = model.calls
        lines.append(f"{model.name} ({model.model}): {model.answered} answered, {model.failed} failed; calls "
                     f"made {calls.get('made', 0)}, cached {calls.get('cached', 0)}, "
                     f"${calls.get('cost_usd', 0.0):.4f}")
        lines += [f"  {LABELS[m]:<28} {cell(model.rates[m])}" for m in METRICS]
    for diff in evaluation.differences:
        lines.append(f"{diff.second} − {diff.first} (paired, same states):")
        lines += [f"  {LABELS[m]:<28} {cell(diff.rates[m], signed=True)}"
                  f"{'  excludes 0' if diff.rates[m].excludes_zero else ''}" for m in METRICS]
    lines.append(f"wrote {out}/ (eval.json, eval.md, eval.png, answers.jsonl)")
    return lines
