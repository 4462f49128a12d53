"""The ablation's tables and plot: `ablation.csv`, `ablation.md`, `agreement.csv`, `ablation.png`.

Rates are over the states a pool decided on (`voted` = reached + abstained), except the
agree-with-student rate, which is over the states where the pool reached a consensus. Files are
written atomically (tmp + rename), like every other output.
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replay.ablation.agreement import AgreementMatrix
from replay.ablation.evaluate import PoolCounts
from replay.ablation.students import STUDENT_COLUMNS, student_row, training_lines
from replay.ablation.training import Training
from replay.rundir.files import temp_path, write_text

if TYPE_CHECKING:
    from replay.ablation.result import Ablation

CSV_FILE, MARKDOWN_FILE, AGREEMENT_FILE, PLOT_FILE = "ablation.csv", "ablation.md", "agreement.csv", \
    "ablation.png"
CSV_COLUMNS = ("pool", "teachers", "size", "states", "voted", "all_teachers_excluded", "unanswered",
               "reached", "abstained", "agree", "pairs", "consensus_rate", "abstain_rate", "agree_rate",
               "cost_usd", "jaccard_full", "excluded_same_family", "dataset", "reached_exact",
               "reached_intent", "invalid", "hindsight_failed", "hindsight_states", "hindsight_reached",
               "hindsight_exact", "hindsight_intent", "hindsight_exact_rate", "hindsight_intent_rate",
               "failed_reached_rate", "pairs_per_usd", "usd_per_pair", "pareto")



def csv_row(counts: PoolCounts, folder: str, pareto: bool | None = None) -> dict[str, Any]:
    """One pool as a row of ablation.csv (`pareto`: on the cost frontier, when it was computed).

    >>> row = csv_row(PoolCounts(pool="a+b", teachers=["a", "b"], states=3, agree=1, pairs=1,
    ...                          abstained=1, excluded_same_family={"b": 2}), "a+b")
    >>> row["voted"], row["consensus_rate"], row["agree_rate"], row["excluded_same_family"]
    (3, 0.6667, 0.5, 'b:2')
    """
    data = counts.model_dump()
    row = {key: data.get(key) for key in CSV_COLUMNS}
    row.update(teachers=" ".join(counts.teachers), size=len(counts.teachers), jaccard_full=counts.jaccard,
               excluded_same_family=" ".join(f"{k}:{v}" for k, v in counts.excluded_same_family.items()),
               dataset=f"{folder}/dataset", pareto="" if pareto is None else pareto)
    h = counts.hindsight
    row.update(hindsight_failed=h.failed, hindsight_states=h.states, hindsight_reached=h.reached,
               hindsight_exact=h.exact, hindsight_intent=h.intent, hindsight_exact_rate=h.exact_rate,
               hindsight_intent_rate=h.intent_rate, failed_reached_rate=h.reached_rate)
    return row


def csv_text(rows: list[PoolCounts], dirs: list[str], pareto: dict[str, bool] | None = None,
             training: Training | None = None) -> str:
    """ablation.csv: a header, then one line per pool, the full pool first; with `training` (--train)
    the trained students' columns after.

    >>> csv_text([PoolCounts(pool="a", teachers=["a"])], ["a"]).splitlines()[1][:12]
    'a,a,1,0,0,0,'
    """
    buffer = io.StringIO()
    columns = CSV_COLUMNS + (STUDENT_COLUMNS if training is not None else ())
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    pareto = pareto or {}
    students = {s.pool: s for s in training.students} if training is not None else {}
    for counts, folder in zip(rows, dirs, strict=True):
        row = csv_row(counts, folder, pareto.get(counts.pool))
        if training is not None:
            row.update(student_row(students.get(counts.pool)))
        writer.writerow(row)
    return buffer.getvalue()


def agreement_csv_text(matrix: AgreementMatrix, intent: AgreementMatrix | None = None) -> str:
    """agreement.csv: one line per ordered pair of teachers; with `intent`, its agreement at the
    intent tier in three more columns.

    >>> from replay.ablation.agreement import PairAgreement
    >>> m = AgreementMatrix(teachers=["a"], cells=[[PairAgreement(a="a", b="a", states=2, agree=2, raw=1.0)]])
    >>> agreement_csv_text(m, m).splitlines()
    ['teacher_a,teacher_b,states,agree,raw,kappa,agree_intent,raw_intent,kappa_intent', 'a,a,2,2,1.0,,2,1.0,']
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    extra = ["agree_intent", "raw_intent", "kappa_intent"] if intent is not None else []
    writer.writerow(["teacher_a", "teacher_b", "states", "agree", "raw", "kappa", *extra])
    for i, line in enumerate(matrix.cells):
        for j, c in enumerate(line):
            more = [] if intent is None else [intent.cells[i][j].agree, intent.cells[i][j].raw,
                                              intent.cells[i][j].kappa]
            writer.writerow([c.a, c.b, c.states, c.agree, c.raw, c.kappa, *more])
    return buffer.getvalue()


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _maybe(value: float | None) -> str:
    return "n/a" if value is None else _percent(value)


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def markdown_text(ablation: Ablation) -> str:
    """ablation.md: the pools table, how to read it, and the full pool's agreement matrices.

    >>> from replay.ablation.result import Ablation
    >>> text = markdown_text(Ablation(run="r", out="o", method="vote", dirs=["a"],
    ...     rows=[PoolCounts(pool="a", teachers=["a"], states=2, pairs=1, agree=1)],
    ...     agreement=AgreementMatrix(teachers=[], cells=[])))
    >>> "| [a](a/README.md) | 1 | 2 | 100.0% | 0.0% | 50.0% | 1 |" in text
    True
    """
    full = ablation.rows[0]
    lines = ["# Teacher-pool ablation", "",
             f"Run `{ablation.run}` · consensus `{ablation.method}` · {full.states} states · "
             f"{len(ablation.rows)} pools · full pool `{full.pool}` (first row).", ""]
    calls = ablation.calls
    if any(calls.values()):
        lines += [f"Teacher and judge calls for this ablation: {calls['made']} made, {calls['cached']} "
                  f"from the cache, {calls['failed']} failed.", ""]
    if ablation.missing:
        lines += [f"**{ablation.missing} answers the early-stop run never asked were counted as no vote** "
                  f"(--allow-missing): pools of the teachers asked last are biased.", ""]
    lines += ["| pool | teachers | voted | consensus | abstain | agree w/ student | pairs | USD | "
              "Jaccard vs full | excluded | exact / intent | hindsight intent / exact | failed reached | "
              "pairs/USD | USD/pair |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row, folder in zip(ablation.rows, ablation.dirs, strict=True):
        h = row.hindsight
        lines.append(f"| [{row.pool}]({folder}/README.md) | {len(row.teachers)} | {row.voted} | "
                     f"{_percent(row.consensus_rate)} | {_percent(row.abstain_rate)} | "
                     f"{_percent(row.agree_rate)} | {row.pairs} | {row.cost_usd:.4f} | "
                     f"{_number(row.jaccard)} | {row.all_teachers_excluded} | "
                     f"{row.reached_exact} / {row.reached_intent} | {_maybe(h.intent_rate)} / "
                     f"{_maybe(h.exact_rate)} | {_maybe(h.reached_rate)} | {_number(row.pairs_per_usd)} | "
                     f"{'n/a' if row.usd_per_pair is None else f'{row.usd_per_pair:.6f}'} |")
    lines += ["", "- **voted**: states the pool decided on (consensus or abstention); **excluded**: states "
              "where every teacher of the pool shares the student's family (never asked, as in "
              "`replay.run`).",
              "- **consensus** / **abstain**: share of the voted states; **agree w/ student**: share of "
              "the states with a consensus where the student did the same (no pair).",
              "- **USD**: what the pool's answers cost when first made, cache hits included, so pools "
              "compare whatever the cache held.",
              "- **Jaccard vs full**: overlap of the pool's pairs (by state_id) with the full pool's.",
              "- **exact / intent**: states with a consensus reached at the exact tier (the same canonical "
              "action) / only at the intent tier (the same intent, written differently).",
              f"- **hindsight**: of the {ablation.rows[0].hindsight.states} states where the student's "
              "action failed and its next turn corrected it, the share where the pool's consensus was that "
              "correction (intent tier / exact tier; no consensus counts as no match); **failed "
              "reached**: the share of "
              "those states where the pool reached a consensus. Each teacher's share, reliability, the cost "
              "frontier and the asking order: [teachers.md](teachers.md).", ""]
    if ablation.training is not None:
        lines += training_lines(ablation.training)
    lines += _matrix_lines(ablation.agreement)
    if ablation.agreement_intent is not None:
        lines += _matrix_lines(ablation.agreement_intent)
    return "\n".join(lines)


def _matrix_lines(matrix: AgreementMatrix) -> list[str]:
    header = "| | " + " | ".join(matrix.teachers) + " |"
    rule = "|---|" + "---:|" * len(matrix.teachers)
    raw = [f"| **{name}** | " + " | ".join(f"{_number(c.raw)} ({c.states})" for c in line) + " |"
           for name, line in zip(matrix.teachers, matrix.cells, strict=True)]
    kappa = [f"| **{name}** | " + " | ".join(_number(c.kappa) for c in line) + " |"
             for name, line in zip(matrix.teachers, matrix.cells, strict=True)]
    if matrix.tier == "intent":
        title, alike, category = "at the intent tier", "have the same intent", "intent key"
    else:
        title, alike, category = "(full pool)", "are canonically equivalent", "canonical form"
    return [f"## Teacher agreement {title}", "",
            f"Share of the states both teachers answered where their actions {alike} "
            "(states in brackets):", "", header, rule, *raw, "",
            f"Cohen's kappa (each {category} a category; n/a where undefined):", "", header, rule,
            *kappa, ""]


def write_plot(ablation: Ablation, path: Path) -> None:
    """ablation.png: pairs and consensus rate per pool (full pool highlighted), then the full pool's
    agreement and kappa heatmaps."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never a display, never a GUI backend
    import matplotlib.pyplot as plt

    rows = ablation.rows
    teachers = ablation.agreement.teachers
    bar_height = max(2.5, 0.32 * len(rows) + 1.2)
    map_height = max(3.2, 0.55 * len(teachers) + 1.6)
    fig = plt.figure(figsize=(13, bar_height + map_height), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[bar_height, map_height])
    _bars(top.subplots(1, 2, sharey=True), rows)
    _heatmaps(bottom.subplots(1, 2), ablation.agreement)
    bottom.supxlabel("over the states both teachers answered; n/a: there is none (e.g. a teacher excluded "
                     "as the student's family)", fontsize=8, color="#555555")
    fig.suptitle(f"Teacher-pool ablation · {ablation.method} · {rows[0].states} states", fontsize=13)
    tmp = temp_path(path).with_suffix(".png")  # savefig picks the format from the suffix
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def _bars(axes: Any, rows: list[PoolCounts]) -> None:
    names = [row.pool + (" (full)" if i == 0 else "") for i, row in enumerate(rows)]
    positions = list(range(len(rows)))
    colors = ["#d62728" if i == 0 else "#1f77b4" for i in positions]
    panels = ((axes[0], [row.pairs for row in rows], "pairs (DPO rows)", "{:.0f}"),
              (axes[1], [100 * row.consensus_rate for row in rows], "consensus rate (% of voted states)",
               "{:.1f}%"))
    for ax, values, label, fmt in panels:
        ax.barh(positions, values, color=colors)
        ax.set_xlabel(label)
        ax.grid(axis="x", alpha=0.3)
        top = max(values, default=0) or 1
        ax.set_xlim(0, top * 1.18)
        for y, value, row in zip(positions, values, rows, strict=True):
            # A pool whose teachers were all excluded decided nothing: say so rather than draw "0".
            text = fmt.format(value) if row.voted else "no state voted on"
            ax.text(value + top * 0.01, y, text, va="center", fontsize=8)
    axes[0].set_yticks(positions, names, fontsize=9)
    axes[0].invert_yaxis()  # the full pool on top, as in the table
    axes[0].set_ylabel("pool")
    axes[0].set_title("pairs per pool")
    axes[1].set_xlim(0, 115)
    axes[1].set_title("consensus rate per pool")


def _heatmaps(axes: Any, matrix: AgreementMatrix) -> None:
    import numpy as np

    n = len(matrix.teachers)
    for ax, key, title, low in ((axes[0], "raw", "agreement (canonically equivalent actions)", 0.0),
                                (axes[1], "kappa", "Cohen's kappa", -1.0)):
        values = np.array([[math.nan if getattr(c, key) is None else getattr(c, key) for c in line]
                           for line in matrix.cells], dtype=float)
        cmap = _cmap("viridis" if key == "raw" else "RdBu")
        image = ax.imshow(values, vmin=low, vmax=1.0, cmap=cmap)
        long_names = max((len(t) for t in matrix.teachers), default=0) > 6
        ax.set_xticks(range(n), matrix.teachers, rotation=30 if long_names else 0,
                      ha="right" if long_names else "center")
        ax.set_yticks(range(n), matrix.teachers)
        ax.set_xlabel("teacher")
        ax.set_ylabel("teacher")
        ax.set_title(f"{title}, full pool", fontsize=10)
        for i in range(n):
            for j in range(n):
                value = values[i, j]
                text = "n/a" if math.isnan(value) else f"{value:.2f}"
                shade = 0.0 if math.isnan(value) else (value - low) / (1.0 - low)
                dark = shade < 0.5 if key == "raw" else abs(value) > 0.6
                ax.text(j, i, text, ha="center", va="center", fontsize=9,
                        color="white" if dark and not math.isnan(value) else "black")
        ax.figure.colorbar(image, ax=ax, shrink=0.8)


def _cmap(name: str) -> Any:
    import matplotlib

    # Undefined cells (no common state, kappa undefined) in grey, not the colour of some value.
    return matplotlib.colormaps[name].with_extremes(bad="#dddddd")


def write_outputs(ablation: Ablation) -> None:
    """All the files into `ablation.out`: these four, then the judging ones (`replay.ablation.judging`)."""
    from replay.ablation.judging import write_judging

    out = Path(ablation.out)
    out.mkdir(parents=True, exist_ok=True)
    pareto = {p.pool: p.pareto for p in ablation.quality.frontier} if ablation.quality else None
    write_text(out / CSV_FILE, csv_text(ablation.rows, ablation.dirs, pareto, ablation.training))
    write_text(out / AGREEMENT_FILE, agreement_csv_text(ablation.agreement, ablation.agreement_intent))
    write_text(out / MARKDOWN_FILE, markdown_text(ablation))
    write_plot(ablation, out / PLOT_FILE)
    write_judging(ablation, out)
