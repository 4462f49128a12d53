"""The dataset card's section on how the labels were checked by the environment (`replay.verify`). Pure,
and light: `replay.export.card` imports it for every run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replay.verification.values import MARGIN_TEXT

COLUMN_DOCS = {
    "value_chosen": "the consensus's value at the state: the mean reward (0/1, swebench harness) of the "
                    "branches that took it and let the student go on; null where not checked",
    "value_rejected": "the student's own action's value at the state, measured the same way",
    "verified": "the environment confirms this row (DPO/SFT: the consensus did better by the margin; KTO: "
                "the label is the one the values give)",
    "flipped": "the student's own action did better than the consensus, by the margin",
    "verification": "the check: `outcome` (verified, flipped, tied, unverifiable, not_a_pair), `reason`, "
                    "each action's rewards and 95% interval, the difference's interval, restore mismatches",
}


def verify_lines(verify: Mapping[str, Any] | None) -> list[str]:
    """The dataset card's section on how labels were checked (empty before any verification).

    >>> lines = verify_lines({"pairs": 3, "verified": 1, "flipped": 1, "tied": 1, "unverifiable": 0,
    ...                       "samples": 2, "restore_mismatches": 0, "rollouts": 3})
    >>> lines[1], lines[5]
    ('## Checked by the environment', '| verified (chosen better) | 1 |')
    """
    if not verify:
        return []
    turns = verify.get("max_turns")
    reasons = ", ".join(f"{k} {v}" for k, v in (verify.get("unverifiable_reasons") or {}).items())
    return ["", "## Checked by the environment", "", "| pairs | n |", "|---|---|",
            f"| verified (chosen better) | {verify.get('verified', 0)} |",
            f"| flipped (the student's action did better) | {verify.get('flipped', 0)} |",
            f"| tied | {verify.get('tied', 0)} |",
            f"| unverifiable | {verify.get('unverifiable', 0)}{f' ({reasons})' if reasons else ''} |", "",
            "Where a pair's state comes from a collected SWE-bench rollout, its labels were checked by what "
            "happens next: the state restored in a fresh container of the instance's image (the rollout's "
            "own tool calls run again, each observation compared with the recorded one: "
            f"{verify.get('restore_mismatches', 0)} differed), the consensus taken there, and apart the "
            "student's own action, then the same student and agent went on "
            + (f"for up to {turns} turns" if turns else "with the turns its rollout had left")
            + f" and the swebench harness graded the patch; {verify.get('samples', '?')} samples each, over "
            f"{verify.get('rollouts', 0)} rollouts. An action's value is its mean reward "
            "(`value_chosen`, `value_rejected`, with 95% Wilson intervals in `verification`). "
            f"{MARGIN_TEXT}. `flipped` rows are flagged, not swapped"
            + (" (KTO: labels follow the values)." if verify.get("format") == "kto" else ".")
            + (" Only verified rows are kept (`--verified-only`)." if verify.get("verified_only") else "")]
