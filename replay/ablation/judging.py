"""The ablation's judging files: `teachers.csv`, `teachers.md`, `ablation.json` and `frontier.png`.

`ablation.json` holds everything (every pool's counts with its hindsight figures, each teacher's
reliability, Shapley shares and leave-one-out deltas, the frontier, the recommendation, the asking
orders, the full pool under vote and weighted) for the view and for scripts. Files are written
atomically, like every other output.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from replay.ablation.quality import METRICS, Quality, TeacherRow
from replay.rundir.files import temp_path, write_text

if TYPE_CHECKING:
    from replay.ablation.result import Ablation

TEACHERS_CSV, TEACHERS_MD, JSON_FILE, FRONTIER_FILE = "teachers.csv", "teachers.md", "ablation.json", \
    "frontier.png"


def teachers_csv_text(quality: Quality) -> str:
    """teachers.csv: one line per teacher; Shapley values, their standard errors (sampled only) and
    leave-one-out deltas per metric.

    >>> from consensus.reliability import Reliability
    >>> from replay.ablation.quality import TeacherRow
    >>> q = Quality(method="vote", min_agreement=0.5, reliability=Reliability(),
    ...             teachers=[TeacherRow(teacher="a", reliability=0.9, shapley={"pairs": 2.0})])
    >>> teachers_csv_text(q).splitlines()[1][:22]
    'a,0.9,0,0.0,2.0,,,,,,,'
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    header = ["teacher", "reliability", "answers", "cost_usd"]
    header += [f"shapley_{m}" for m in METRICS] + [f"stderr_{m}" for m in METRICS]
    header += [f"loo_{m}" for m in METRICS]
    writer.writerow(header)
    for row in quality.teachers:
        writer.writerow([row.teacher, row.reliability, row.answers, row.cost_usd,
                         *(row.shapley.get(m, "") for m in METRICS),
                         *(row.stderr.get(m, "") for m in METRICS),
                         *(row.leave_one_out.get(m, "") for m in METRICS)])
    return buffer.getvalue()


def _num(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None or value == "" else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def teachers_md_text(quality: Quality) -> str:
    """teachers.md: reliability, shares, the frontier, the recommendation and the asking orders."""
    sampled = quality.shapley_exact is False
    lines = ["# Which teachers are worth paying for", "",
             f"Consensus `{quality.method}` · min agreement {quality.min_agreement} · from the run's answers "
             "(no calls).", "", "## Each teacher", "",
             "| teacher | reliability | answers | USD | Shapley pairs | Shapley hindsight (intent) | "
             "Shapley hindsight (exact) | Shapley USD | without it: pairs | without it: hindsight |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in quality.teachers:
        def share(metric: str, digits: int = 3, row: TeacherRow = row) -> str:
            text = _num(row.shapley.get(metric), digits)
            return f"{text} ± {_num(row.stderr.get(metric), digits)}" if sampled else text

        lines.append(f"| {row.teacher} | {_num(row.reliability)} | {row.answers} | {row.cost_usd:.4f} | "
                     f"{share('pairs', 2)} | {share('hindsight_intent')} | {share('hindsight_exact')} | "
                     f"{share('cost_usd', 4)} | {_num(_neg(row.leave_one_out.get('pairs')), 0)} | "
                     f"{_num(_neg(row.leave_one_out.get('hindsight_intent')))} |")
    full = quality.full_value
    shapley_note = ("exact, from every subset" if quality.shapley_exact else
                    f"sampled from {quality.permutations} seeded orders, ± one standard error"
                    if sampled else "not computed: " + "; ".join(quality.skipped))
    rel = quality.reliability
    lines += ["", f"- **reliability**: one-coin Dawid–Skene over intent keys ({rel.states} states with ≥ 2 "
              f"votes, {rel.iterations} EM iterations): the estimated chance the teacher gives a state's "
              "true answer, with no ground truth.",
              f"- **Shapley** ({shapley_note}): the teacher's average marginal contribution over every "
              f"order of joining; each column adds up to the full pool's value (pairs "
              f"{full.get('pairs', 0):.0f}, hindsight {_pct(full.get('hindsight_intent'))}, USD "
              f"{full.get('cost_usd', 0.0):.4f}).",
              "- **without it**: the full pool's change when the teacher leaves (leave-one-out).", ""]
    if quality.reliability.families:
        names = [row.teacher for row in quality.teachers]
        lines += ["## Reliability per tool family", "", "| family | " + " | ".join(names) + " |",
                  "|---|" + "---:|" * len(names)]
        for family, values in quality.reliability.families.items():
            counts = quality.reliability.family_answers[family]
            cells = [f"{_num(values.get(n))} ({counts.get(n, 0)})" if n in values else "n/a" for n in names]
            lines.append(f"| {family} | " + " | ".join(cells) + " |")
        lines += ["", "States in brackets; a family shows a teacher with at least 5 of its states.", ""]
    if quality.methods:
        lines += ["## The full pool: majority vote against the weighted vote", "",
                  "| method | pairs | consensus | hindsight (intent) | hindsight (exact) |",
                  "|---|---:|---:|---:|---:|"]
        for name, c in quality.methods.items():
            lines.append(f"| {name} | {c.pairs} | {c.reached} | {_pct(c.hindsight.intent_rate)} | "
                         f"{_pct(c.hindsight.exact_rate)} |")
        lines.append("")
    lines += ["## Frontier", "", f"Pools ({quality.frontier_pools}) by cost against hindsight agreement; "
              "Pareto-optimal: no other pool is as cheap and as good, one of them strictly. See "
              "frontier.png.", "",
              *_frontier_rows(quality)]
    if quality.recommended:
        lines += ["", f"**Recommended: `{quality.recommended}`** — {quality.recommend_why}."]
    lines += ["", "## Asking order for --early-stop", "",
              "Replayed from the answers in hand: ask one teacher at a time in this order, stop once the "
              "rest cannot change the vote.", "",
              "| order | teachers | calls | saved | USD | USD saved | same outcome |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for order in quality.asking_orders:
        lines.append(f"| {order.name} | {', '.join(order.order)} | {order.calls} | {order.calls_saved} | "
                     f"{order.usd:.4f} | {order.usd_saved:.4f} | {order.same_outcome} / {order.states} |")
    return "\n".join(lines) + "\n"


def _frontier_rows(quality: Quality) -> list[str]:
    """The Pareto-optimal pools, cheapest first; with --train their trained students' figures too."""
    students = any(p.student is not None for p in quality.frontier)
    extra = (" trained student's accuracy | its gain per USD |", "---:|---:|") if students else ("", "")
    lines = ["| pool | USD | pairs | hindsight (intent) | Pareto |" + extra[0],
             "|---|---:|---:|---:|---|" + extra[1]]
    for p in sorted(quality.frontier, key=lambda p: (p.cost_usd, p.pool)):
        if p.pareto:
            more = f" {_num(p.student, 2)} | {_num(p.student_gain_per_usd, 4)} |" if students else ""
            lines.append(f"| {p.pool} | {p.cost_usd:.4f} | {p.pairs} | {_pct(p.hindsight)} | yes |{more}")
    return lines


def _neg(value: float | None) -> float | None:
    return None if value is None else 0.0 - value  # never "-0.000"


def json_bytes(ablation: Ablation) -> bytes:
    """ablation.json: every pool (counts, hindsight) and the judging, in one document."""
    data = ablation.model_dump(mode="json", exclude={"agreement", "agreement_intent"})
    data["pools"] = [{**row, "dataset": f"{folder}/dataset"} for row, folder in
                     zip(data.pop("rows"), ablation.dirs, strict=True)]
    data.pop("dirs", None)
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


def write_frontier(quality: Quality, path: Path) -> None:
    """frontier.png: pools by cost against hindsight agreement (left) and pairs (right), the
    Pareto-optimal ones marked and named, the recommended one circled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = quality.frontier
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), layout="constrained")
    for ax, label, read in ((axes[0], "hindsight agreement, intent tier (%)",
                             lambda p: 100 * (p.hindsight or 0.0)),
                            (axes[1], "pairs", lambda p: float(p.pairs))):
        ax.scatter([p.cost_usd for p in points], [read(p) for p in points], c="#9aa7b8", s=18,
                   label="pool")
        best = sorted((p for p in points if p.pareto), key=lambda p: p.cost_usd)
        ax.plot([p.cost_usd for p in best], [read(p) for p in best], "-o", color="#d62728",
                label="Pareto-optimal (cost vs hindsight)")
        for p in best:
            ax.annotate(p.pool, (p.cost_usd, read(p)), fontsize=7, xytext=(3, 3), textcoords="offset points")
        for p in points:
            if p.pool == quality.recommended:
                ax.scatter([p.cost_usd], [read(p)], s=180, facecolors="none", edgecolors="#2ca02c",
                           linewidths=2, label="recommended")
        ax.set_xlabel("USD (the pool's answers)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Teacher pools by cost · {quality.method} · {quality.frontier_pools}", fontsize=12)
    tmp = temp_path(path).with_suffix(".png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def write_judging(ablation: Ablation, out: Path) -> None:
    write_text(out / JSON_FILE, json_bytes(ablation).decode())
    if ablation.quality is None:
        return
    write_text(out / TEACHERS_CSV, teachers_csv_text(ablation.quality))
    write_text(out / TEACHERS_MD, teachers_md_text(ablation.quality))
    write_frontier(ablation.quality, out / FRONTIER_FILE)
