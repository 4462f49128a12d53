"""`OUT/loop.md` and `OUT/loop.png`: the rounds side by side, from loop.json alone (rewritten each round)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.loop.ledger import Ledger

MD_FILE, PLOT_FILE = "loop.md", "loop.png"


def rows(ledger: Ledger) -> list[dict[str, Any]]:
    """One dict per finished round: the figures loop.md shows."""
    out = []
    for key in sorted(ledger.data["rounds"], key=int):
        round_, stages = int(key), ledger.data["rounds"][key]["stages"]
        resolve = (stages.get("resolve") or {}).get("resolve") or {}
        evaluation = stages.get("eval") or {}
        me = (evaluation.get("models") or {}).get(f"round-{round_}", {})
        diff = (evaluation.get("differences") or {}).get(f"round-{round_} - round-0", {})
        train = stages.get("train") or {}
        usd = sum((stages.get(s) or {}).get("teacher_usd") or 0.0 for s in ("pairs", "heldout"))
        tokens = {k: sum(((stages.get(s) or {}).get("student_tokens") or {}).get(k, 0)
                         for s in ("collect", "resolve")) for k in ("prompt", "completion")}
        out.append({"round": round_, "resolve": resolve, "agreement": me.get("consensus_intent"),
                    "valid": me.get("valid"), "agreement_diff": diff.get("consensus_intent"),
                    "valid_diff": diff.get("valid"), "tool_call": me.get("tool_call"),
                    "tool_call_diff": diff.get("tool_call"), "held_out": train.get("held_out"),
                    "pairs": (stages.get("pairs") or {}).get("pairs"), "usd": round(usd, 6),
                    "student_tokens": tokens,
                    "seconds": {name: stage.get("seconds") for name, stage in stages.items()}})
    return out


def _rate(block: dict[str, Any] | None) -> str:
    if not block or block.get("value") is None:
        return "–"
    low, high = block.get("low"), block.get("high")
    spread = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    return f"{block['value']:.2f}{spread} (n={block.get('n')})"


def _resolve(block: dict[str, Any]) -> str:
    if not block or block.get("rate") is None:
        return "–"
    interval = block.get("interval") or (None, None)
    spread = f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval[0] is not None else ""
    return f"{block['resolved']}/{block['evaluated']} = {block['rate']:.2f}{spread}"


def _held_out(block: dict[str, Any] | None) -> str:
    if not block:
        return "–"
    parts = []
    for name, after in (block.get("after") or {}).items():
        before = (block.get("before") or {}).get(name, {})
        if after.get("pairs"):
            parts.append(f"{name}: {_num(before.get('accuracy'))} → {_num(after.get('accuracy'))} "
                         f"({after['pairs']} pairs)")
    return "; ".join(parts) or "–"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def markdown(ledger: Ledger) -> str:
    table = rows(ledger)
    lines = ["# replay.loop", "", f"`{ledger.data['settings'].get('command', '')}`", "",
             "| round | resolve rate (held-out instances) | consensus agreement | Δ vs round 0 | "
             "valid (prose counts) | Δ vs round 0 | tool calls | Δ vs round 0 | held-out preference accuracy "
             "(before → after) | pairs | teacher USD | student tokens (prompt / completion) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in table:
        lines.append(f"| {row['round']} | {_resolve(row['resolve'])} | {_rate(row['agreement'])} | "
                     f"{_rate(row['agreement_diff']) if row['round'] else '–'} | {_rate(row['valid'])} | "
                     f"{_rate(row['valid_diff']) if row['round'] else '–'} | {_rate(row['tool_call'])} | "
                     f"{_rate(row['tool_call_diff']) if row['round'] else '–'} | "
                     f"{_held_out(row['held_out'])} | "
                     f"{row['pairs'] if row['pairs'] is not None else '–'} | {row['usd']:.4f} | "
                     f"{row['student_tokens']['prompt']} / {row['student_tokens']['completion']} |")
    lines += ["", "Seconds per stage:", "", "| round | " + " | ".join(_stage_order(table)) + " |",
              "|---|" + "---|" * len(_stage_order(table))]
    for row in table:
        lines.append(f"| {row['round']} | " + " | ".join(
            _num(row["seconds"].get(name)) if row["seconds"].get(name) is not None else "–"
            for name in _stage_order(table)) + " |")
    lines += ["", "Consensus agreement: the share of the held-out states (round 0's held-out rollouts, "
              "judged by the teachers once) where the round's student proposes the teachers' consensus "
              "(intent); Δ: round K minus round 0 on the same states, paired, with a 95% interval over "
              "traces (replay.eval). Valid: answers that parse and call offered tools correctly, prose "
              "included; tool calls: valid answers that call a tool (prose is not one). Resolve rate: "
              "held-out instances resolved by the swebench harness, "
              "Wilson 95% interval. Held-out preference accuracy: the share of the round's test-split pairs "
              "where the student prefers chosen, before and after the round's training (held_out.json).", ""]
    return "\n".join(lines)


def _stage_order(table: list[dict[str, Any]]) -> list[str]:
    order = ["collect", "pairs", "verify", "train", "resolve", "heldout", "eval"]
    seen = {name for row in table for name in row["seconds"]}
    return [name for name in order if name in seen]


def plot(ledger: Ledger, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = rows(ledger)
    figure, axis = plt.subplots(figsize=(6, 3.5))
    for label, pick in (("consensus agreement", lambda r: r["agreement"]),
                        ("valid (prose counts)", lambda r: r["valid"]),
                        ("tool calls", lambda r: r["tool_call"]),
                        ("resolve rate", lambda r: _as_rate(r["resolve"]))):
        points = [(r["round"], pick(r)) for r in table if pick(r) and pick(r).get("value") is not None]
        if not points:
            continue
        xs = [x for x, _ in points]
        ys = [p["value"] for _, p in points]
        errors = [[max(0.0, p["value"] - (p.get("low") if p.get("low") is not None else p["value"]))
                   for _, p in points],
                  [max(0.0, (p.get("high") if p.get("high") is not None else p["value"]) - p["value"])
                   for _, p in points]]
        axis.errorbar(xs, ys, yerr=errors, marker="o", capsize=3, label=label)
    axis.set_xlabel("round")
    axis.set_ylim(-0.05, 1.05)
    axis.set_xticks([r["round"] for r in table])
    axis.legend(loc="best", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _as_rate(resolve: dict[str, Any]) -> dict[str, Any] | None:
    if not resolve or resolve.get("rate") is None:
        return None
    low, high = resolve.get("interval") or (None, None)
    return {"value": resolve["rate"], "low": low, "high": high}


def write_report(ledger: Ledger, out: Path) -> None:
    (out / MD_FILE).write_text(markdown(ledger))
    plot(ledger, out / PLOT_FILE)
