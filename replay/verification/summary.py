"""Each pair's check from its branches' results, report.json's `verify` counts and the card's section. Pure.

`verify` keys (DESIGN.md): `pairs` (the run's pairs), `verified`, `flipped`, `tied`, `unverifiable` (they
add up to `pairs`), `restore_mismatches` (replayed observations that differed from the record, over
every branch; `restore_volatile` beside it: those that differed in durations, clock times or dates
only), `rollouts` (the collected rollouts whose states were branched), `student_tokens` (prompt +
completion, every branch graded or not, earlier runs' included), `usd` (the student's, when it is an
official API; a vLLM costs nothing here). Beside them: `exit_status` (the branches, graded or not, by
how they ended) and `turns` (their student turns; 0 over branches run: none took a turn), why pairs are
unverifiable, the branches run, resumed and failed, the settings, the margin.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from collect.branch import BranchResult
from replay.verification.plan import ARMS, Pair
from replay.verification.rows import PairCheck
from replay.verification.values import MARGIN_TEXT, outcome_of, value_of


def check_pair(pair: Pair, results: Mapping[str, BranchResult]) -> PairCheck:
    """A pair's check from the results of its branches (keys without a result count as not graded)."""
    if pair.reason is not None:
        return PairCheck(state_id=pair.state_id, outcome="unverifiable", reason=pair.reason)
    values, branches, mismatches, volatile = {}, [], 0, 0
    for arm in ARMS:
        jobs = pair.jobs.get(arm, [])
        rewards = [results[job.key].reward if job.key in results else None for job in jobs]
        values[arm] = value_of(rewards, len(jobs))
        for job in jobs:
            result = results.get(job.key)
            mismatches += len(result.mismatches) if result else 0
            volatile += result.volatile if result else 0
            branches.append(_branch_entry(arm, job.sample, result))
    outcome, difference = outcome_of(values["chosen"], values["rejected"])
    return PairCheck(state_id=pair.state_id, outcome=outcome,
                     reason="branch_failed" if outcome == "unverifiable" else None,
                     chosen=values["chosen"], rejected=values["rejected"], difference=difference,
                     restore_mismatches=mismatches, restore_volatile=volatile,
                     max_turns=next((job.max_turns for jobs in pair.jobs.values() for job in jobs), None),
                     branches=branches)


def _branch_entry(arm: str, sample: int, result: BranchResult | None) -> dict[str, Any]:
    if result is None:
        return {"arm": arm, "sample": sample, "reward": None, "error_kind": "not_run"}
    return {"arm": arm, "sample": sample, "reward": result.reward, "exit_status": result.exit_status,
            "turns": result.turns, "restored": result.restored, "replayed": result.replayed,
            "mismatches": len(result.mismatches),
            "error_kind": result.error_kind, "error": result.error, "node": result.node}


def summarize(pairs: Sequence[Pair], checks: Sequence[PairCheck], results: Mapping[str, BranchResult],
              run: Mapping[str, Any], usd: float = 0.0) -> dict[str, Any]:
    """report.json `verify`: the counts (module doc), then `run` (this run's own figures and settings)."""
    outcomes = Counter(check.outcome for check in checks)
    mine = [results[job.key] for pair in pairs for jobs in pair.jobs.values() for job in jobs
            if job.key in results]
    return {
        "pairs": len(checks), "verified": outcomes["verified"], "flipped": outcomes["flipped"],
        "tied": outcomes["tied"], "unverifiable": outcomes["unverifiable"],
        "restore_mismatches": sum(check.restore_mismatches for check in checks),
        "restore_volatile": sum(check.restore_volatile for check in checks),
        "rollouts": len({pair.rollout_id for pair in pairs if pair.jobs}),
        "student_tokens": sum(r.prompt_tokens + r.completion_tokens for r in mine),
        "usd": round(usd, 6),
        "exit_status": dict(sorted(Counter(r.exit_status for r in mine if r.exit_status).items())),
        "turns": sum(r.turns for r in mine),
        "unverifiable_reasons": dict(sorted(Counter(c.reason for c in checks
                                                    if c.outcome == "unverifiable").items())),
        "margin": MARGIN_TEXT, **run,
    }


def estimate(pairs: Sequence[Pair], todo: int) -> dict[str, Any]:
    """What a run will take: branches (all, and left to run), rollouts, student tokens (expected: each
    branch as long as its rollout went on; at most: every branch to --max-turns)."""
    jobs = [(pair, job) for pair in pairs for jobs in pair.jobs.values() for job in jobs]
    return {"branches": len(jobs), "to_run": todo, "rollouts": len({pair.rollout_id for pair, _ in jobs}),
            "pairs": len(pairs), "checkable": sum(bool(pair.jobs) for pair in pairs),
            "student_tokens": sum(pair.estimate[0] for pair, _ in jobs),
            "student_tokens_max": sum(pair.estimate[1] for pair, _ in jobs),
            "unverifiable_reasons": dict(sorted(Counter(p.reason for p in pairs if p.reason).items()))}
