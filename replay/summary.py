"""The short table a run ends with."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from replay.rundir.report import Report


def print_summary(report: Report, out: str, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=f"teacher-replay → {out}", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    rows = [("files", report.files), ("lines", report.lines),
            ("skipped lines", sum(report.skipped_lines.values())),
            ("traces", report.traces), ("states", report.states)]
    if report.outcomes:
        rows.append(("  by outcome", " · ".join(f"{k} {n}" for k, n in report.outcomes.items())))
    if report.filtered:
        rows.append(("  left out by --project/--exclude-project/--since/--until",
                     " · ".join(f"{k} {n}" for k, n in report.filtered.items())))
    if report.pseudonymised:
        rows.append(("  pseudonymised (distinct per trace)",
                     " · ".join(f"{k} {n}" for k, n in report.pseudonymised.items())))
    if report.states_unselected:
        rows.append(("  selected / unselected (--select)",
                     f"{report.states - report.states_unselected} / {report.states_unselected}"))
    if not report.dry_run:
        rows += [("teacher calls made / cached / failed",
                  "{made} / {cached} / {failed}".format(**report.teacher_calls)),
                 ("all teachers excluded", report.states_all_teachers_excluded),
                 ("failed (no usable answer)", report.states_failed),
                 ("abstained", report.consensus.get("abstained", 0)),
                 ("consensus exact / intent tier",
                  f"{report.consensus.get('exact', 0)} / {report.consensus.get('intent', 0)}"),
                 ("agree", report.agree), ("pairs", report.pairs),
                 ("cost (USD)", f"{report.cost_usd:.4f}"), ("prompt cache", _cache_line(report))]
        if report.states_budget_stopped:
            rows.insert(-6, ("  of them stopped by --max-cost", report.states_budget_stopped))
        if waited := report.teacher_calls.get("waited"):
            rows.append(("answers another run was asking, waited for", waited))
        for teacher, pace in sorted(report.extra.get("rate_limits", {}).items()):
            rows.append((f"  pace {teacher}", f"{pace['tokens_per_minute']:,} tokens/min · "
                                              f"{pace['rate_limited']} answered 429"))
    for teacher, est in sorted(report.extra.get("estimate", {}).items()):
        tokens = f"{est['prompt_tokens']:,}"
        cached = est.get("cached_prompt_tokens", 0) / est["prompt_tokens"] if est["prompt_tokens"] else 0.0
        batch = (f" by batch (${est['cost_usd_if_cached']:.2f} if the batch hits the prompt cache)"
                 if est.get("batch") else "")
        spread = (f" (${est['cost_usd_low']:.2f}–${est['cost_usd_high']:.2f})" if "cost_usd_high" in est
                  else "")
        rows.append((f"estimate {teacher}", f"{est['calls']} calls · {tokens} prompt tokens "
                                            f"({cached:.0%} cached) · ${est['cost_usd']:.2f}{spread}{batch}"))
    for teacher, source in sorted(report.extra.get("estimate_sources", {}).items()):
        rows.append((f"  completions {teacher}", source))
    if report.extra.get("estimate"):
        total = sum(est["cost_usd"] for est in report.extra["estimate"].values())
        low, high = (sum(est.get(f"cost_usd_{end}", 0.0) for est in report.extra["estimate"].values())
                     for end in ("low", "high"))
        rows.append(("estimate (USD)", f"${total:.2f}, range ${low:.2f}–${high:.2f}, prompt cache "
                                       f"modelled per trace"))
    if waves := report.extra.get("trace_parallel"):
        k1, chosen = waves["k1"], waves["chosen"]
        rows.append(("trace parallel K = 1", f"${k1['cost_usd']:.2f} · {k1['hours']:.2f} h"))
        rows.append((f"trace parallel K = {waves['k']}",
                     f"${chosen['cost_usd']:.2f} · {chosen['hours']:.2f} h ({waves['waves']} waves for "
                     f"{waves['states']} states; {waves['latency_assumed_s']:.0f} s a call assumed)"))
    if batch := report.extra.get("batch"):
        direct = f" · called directly: {', '.join(batch['direct'])}" if batch["direct"] else ""
        rows.append(("batches", f"{batch['submitted']} submitted · {batch['resumed']} resumed · "
                                f"{batch['answered']} answers at batch price{direct}"))
    unpriced = sorted(report.extra.get("unpriced", {}).items())
    rows += [(f"unpriced {teacher}", reason) for teacher, reason in unpriced]
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(table)


def _cache_line(report: Report) -> str:
    """How much of the prompt tokens paid for the providers served from their prompt caches.

    >>> print(_cache_line(Report(tokens={"prompt": 1000, "completion": 5, "cached_prompt": 870})))
    87% of 1,000 prompt tokens read from the providers' caches
    """
    prompt, cached = report.tokens.get("prompt", 0), report.tokens.get("cached_prompt", 0)
    share = cached / prompt if prompt else 0.0
    return f"{share:.0%} of {prompt:,} prompt tokens read from the providers' caches"
