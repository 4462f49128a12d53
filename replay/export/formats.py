"""`--format dpo | kto | sft`: the judged states' rows in the dataset format of one TRL trainer.

Every format keeps TRL's conversational `prompt` and `tools` exactly as the DPO rows hold them (tool-call
arguments as objects) and every provenance column, `student_outcome` included. What each takes:

- `dpo` (DPOTrainer): the pairs as they are, `prompt` / `chosen` / `rejected`.
- `kto` (KTOTrainer, TRL's unpaired preference format `prompt` / `completion` / `label`):
  a state with a consensus gives the consensus as a desirable row (`label` true) — the pairs and the
  states where the student agreed with the teachers; a state whose student action failed (outcome
  `error`, `rejected`, `interrupted`) gives the student's action as an undesirable row (`label` false),
  also where the teachers abstained. A state where the student agreed with the teachers and its action
  failed gives no row at all: the teachers endorse what failed, so neither label can be trusted
  (counted as `agree_failed`). The student's own action on an agree state is not a second desirable
  row: it would weigh agree states twice and reward phrasings the teachers rewrote.
- `sft` (SFTTrainer, conversational prompt-completion): `prompt` + the consensus, exactly KTO's
  desirable rows. Prompt-completion rather than `messages`, so that SFTTrainer's default
  `completion_only_loss` trains on the consensus alone, never on the student's own earlier turns.

Rows come in from `replay.decide.states.settle` (DPO rows, plus a `verdict` column beyond pairs); an agree
row's `chosen` is the consensus, an abstained row's is empty. Outcomes that are unknown (`student_outcome`
null: the source recorded none) never make an undesirable row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from ingestion.outcome import FAILED
from replay.export.pairs import PAIR_COLUMNS

FORMATS = ("dpo", "kto", "sft")
# The verdicts whose states each format needs a row of (`replay.decide.states.settle`'s `keep`).
KEEP = {"dpo": frozenset({"pair"}), "kto": frozenset({"pair", "agree", "abstained"}),
        "sft": frozenset({"pair", "agree"})}
PROVENANCE = tuple(c for c in PAIR_COLUMNS if c not in ("prompt", "chosen", "rejected", "tools"))
COLUMNS = {
    "dpo": PAIR_COLUMNS,
    "kto": ("prompt", "completion", "label", "tools", *PROVENANCE, "verdict", "completion_from"),
    "sft": ("prompt", "completion", "tools", *PROVENANCE, "verdict"),
}
TRAINERS = {"dpo": "DPOTrainer", "kto": "KTOTrainer", "sft": "SFTTrainer"}


def _failed(row: dict[str, Any]) -> bool:
    return row.get("student_outcome") in FAILED


def _unpaired(row: dict[str, Any], completion: list[dict[str, Any]], label: bool,
              source: str) -> dict[str, Any]:
    out = {"prompt": row["prompt"], "completion": completion, "label": label, "tools": row["tools"]}
    out.update({column: row.get(column) for column in PROVENANCE})
    out["verdict"], out["completion_from"] = row.get("verdict", "pair"), source
    return out


def kto_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """TRL's unpaired preference rows: the consensus desirable, a failed student action undesirable.

    >>> p, a = [{"role": "user", "content": "fix it"}], lambda text: [{"role": "assistant", "content": text}]
    >>> row = {"prompt": p, "chosen": a("cons"), "rejected": a("stud"), "tools": [], "verdict": "pair"}
    >>> [(r["completion"][0]["content"], r["label"]) for r in kto_rows([{**row, "student_outcome": "error"}])]
    [('cons', True), ('stud', False)]
    >>> [r["label"] for r in kto_rows([{**row, "student_outcome": "ok"}])]
    [True]
    >>> kto_rows([{**row, "verdict": "agree", "student_outcome": "rejected"}])
    []
    >>> [r["completion_from"] for r in kto_rows([{**row, "chosen": [], "verdict": "abstained",
    ...                                           "student_outcome": "interrupted"}])]
    ['student']
    """
    out = []
    for row in rows:
        verdict, failed = row.get("verdict", "pair"), _failed(row)
        if row["chosen"] and not (verdict == "agree" and failed):
            out.append(_unpaired(row, row["chosen"], True, "consensus"))
        if failed and verdict != "agree":
            out.append(_unpaired(row, row["rejected"], False, "student"))
    return out


def sft_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prompt + the consensus: KTO's desirable rows without `label` and `completion_from`.

    >>> row = {"prompt": [], "chosen": [{"role": "assistant", "content": "x"}], "rejected": [], "tools": []}
    >>> sorted(set(sft_rows([row])[0]) ^ set(COLUMNS["sft"]))
    []
    """
    return [{column: row[column] for column in COLUMNS["sft"]} for row in kto_rows(rows) if row["label"]]


def dpo_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pairs only, without the `verdict` column other formats need.

    >>> dpo_rows([{"verdict": "agree"}, {"verdict": "pair", "x": 1}, {"x": 2}])
    [{'x': 1}, {'x': 2}]
    """
    return [{k: v for k, v in row.items() if k != "verdict"} for row in rows
            if row.get("verdict", "pair") == "pair"]


def swap_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`--swap-pairs`, a control: each pair's chosen and rejected exchanged (new dicts; agree and abstained
    rows, and pairs without a chosen, are the same objects). Every format is then made from these rows:
    DPO prefers the student's action, KTO's desirable row is the student's action, SFT imitates it.

    >>> a = lambda text: [{"role": "assistant", "content": text}]
    >>> rows = [{"chosen": a("cons"), "rejected": a("stud"), "verdict": "pair"},
    ...         {"chosen": a("same"), "rejected": a("same"), "verdict": "agree"}]
    >>> [(r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in swap_rows(rows)]
    [('stud', 'cons'), ('same', 'same')]
    >>> swap_rows(rows)[1] is rows[1]
    True
    """
    return [{**row, "chosen": row["rejected"], "rejected": row["chosen"]}
            if row.get("verdict", "pair") == "pair" and row.get("chosen") else row for row in rows]


def format_rows(rows: Iterable[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """The rows of `fmt` (one of `FORMATS`) from `settle`'s rows."""
    return {"dpo": dpo_rows, "kto": kto_rows, "sft": sft_rows}[fmt](rows)


def format_counts(rows: list[dict[str, Any]], formatted: list[dict[str, Any]], fmt: str) -> dict[str, Any]:
    """report.json `format`: the format, its rows, and for KTO the rows per label and what fed them.

    >>> row = {"prompt": [], "chosen": [{"role": "assistant", "content": "x"}], "rejected": [], "tools": [],
    ...        "verdict": "agree", "student_outcome": "error"}
    >>> format_counts([row], kto_rows([row]), "kto")["agree_failed"]
    1
    """
    out: dict[str, Any] = {"name": fmt, "trainer": TRAINERS[fmt], "rows": len(formatted)}
    if fmt != "dpo":
        out["from_verdicts"] = dict(sorted(Counter(r.get("verdict", "pair") for r in formatted).items()))
    if fmt == "kto":
        out["desirable"] = sum(bool(r["label"]) for r in formatted)
        out["undesirable"] = len(formatted) - out["desirable"]
        out["agree_failed"] = sum(r.get("verdict") == "agree" and _failed(r) for r in rows)
    return out
