"""Writes tests/data/gitleaks_cases.json: gitleaks' own true and false positives, as data.

    python -m tests.gitleaks_cases --repo /path/to/gitleaks/.git

reads `cmd/generate/config/rules/*.go` at the commit named in configs/gitleaks.toml's header (the rule
set we redact with), evaluates each rule function's `tps` / `fps` (tests/gitleaks_go.py: random secrets
from a seeded generator, so the file is the same on every run), and keeps for each case what gitleaks'
rules find in it, read the way gitleaks reads them (teachers.secret_rules.gitleaks_rule_set):
- a tp: the credentials its own rule finds (the secret group; the whole match for the rules of
  configs/redact.toml's `whole_match`, whose group is a fragment). A generated tp its rule does not find
  (a random value under an entropy floor or on a stopword) is drawn again, as gitleaks' own generator
  would fail and be rerun; a written one is kept out and counted under `unread`.
- an fp: the rules of gitleaks' whole config that flag it anyway (`flagged_by`); tests/test_gitleaks_cases.py
  lets those change and asks every other fp to come out intact.
The cases are gitleaks' (MIT licence, Copyright (c) 2019 Zachary Rice), at the commit recorded in the file.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from teachers.secret_rules import Rule, RuleSet, gitleaks_rule_set, shannon_entropy
from tests import gitleaks_go

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "gitleaks_cases.json"
RULES_DIR = "cmd/generate/config/rules"
_ATTEMPTS = 40


def pinned_commit() -> str:
    head = (ROOT / "configs" / "gitleaks.toml").read_text()[:2000]
    found = re.search(r"\(commit ([0-9a-f]{40})", head)
    if not found:
        raise SystemExit("configs/gitleaks.toml names no commit in its header")
    return found.group(1)


def whole_match_rules() -> set[str]:
    import tomllib

    return set(tomllib.loads((ROOT / "configs" / "redact.toml").read_text()).get("whole_match", []))


def _group(match: Any, rule: Rule) -> int:
    if rule.secret_group:
        return rule.secret_group
    return next((i for i, g in enumerate(match.groups(), 1) if g), 0)


def findings(text: str, rules: RuleSet, only: str | None = None,
             whole: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """(rule id, credential) for each finding of gitleaks' rules in `text`, with gitleaks' checks:
    keywords, regex, secret group, entropy, the rule's and the global allowlists."""
    data = text.encode()
    out = []
    for rule in rules.candidates(data.lower()):
        if only is not None and rule.id != only:
            continue
        for match in rule.regex.finditer(data):
            start, end = match.span(_group(match, rule))
            secret = data[start:end]
            if not secret or (rule.entropy and shannon_entropy(secret.decode("utf-8", "replace"))
                              <= rule.entropy):
                continue
            line_start = data.rfind(b"\n", 0, start) + 1
            line_end = data.find(b"\n", end)
            line = data[line_start:line_end if line_end >= 0 else len(data)]
            if any(a.allows(secret, match.group(0), line) for a in (*rules.allowlists, *rule.allowlists)):
                continue
            credential = match.group(0) if rule.id in whole else secret
            out.append((rule.id, credential.decode("utf-8", "replace").strip()))
    return out


def _sources(repo: str, commit: str) -> dict[str, str]:
    names = subprocess.run(["git", "--git-dir", repo, "ls-tree", "--name-only", commit, RULES_DIR + "/"],
                           check=True, capture_output=True, text=True).stdout.split()
    return {name: subprocess.run(["git", "--git-dir", repo, "show", f"{commit}:{name}"], check=True,
                                 capture_output=True, text=True).stdout
            for name in names if name.endswith(".go") and not name.endswith("_test.go")}


def generate(repo: str) -> dict[str, Any]:
    commit = pinned_commit()
    rules = gitleaks_rule_set()
    ids = {rule.id for rule in rules.rules}
    whole = frozenset(whole_match_rules())
    sources = _sources(repo, commit)
    bodies = {}
    globals_ = gitleaks_go.Env(random.Random(commit))
    for _, source in sorted(sources.items()):
        toks = gitleaks_go.tokens(source)
        gitleaks_go.package_vars(toks, globals_)
        for func, (start, end) in gitleaks_go.functions(toks).items():
            bodies[func] = toks[start:end]
    headers = gitleaks_go.rule_cases("generateTestValues", bodies["generateTestValues"], random.Random(0))
    gitleaks_go.JWT_HEADERS.update(headers.names["headers"])
    tps: list[dict[str, Any]] = []
    fps: list[dict[str, Any]] = []
    unread: list[dict[str, str]] = []
    for func, body in sorted(bodies.items()):
        if not any(t.text == "RuleID" for t in body):
            continue
        best = None
        for attempt in range(_ATTEMPTS):
            cases = gitleaks_go.rule_cases(func, body, random.Random(f"{commit}:{func}:{attempt}"),
                                           globals_.names)
            if cases.error or cases.rule_id not in ids:
                break
            found = [findings(tp, rules, cases.rule_id, whole) for tp in cases.tps]
            missed = sum(not f for f in found)
            flagged = [findings(fp, rules, cases.rule_id) for fp in cases.fps]
            wrong = sum(bool(f) for f in flagged)
            if best is None or missed + wrong < best[0]:
                best = (missed + wrong, cases, found)
            if not missed and not wrong:
                break
        if cases.error == "validates nothing":
            continue
        if cases.error or cases.rule_id not in ids:
            why = cases.error or f"rule {cases.rule_id!r} is not in configs/gitleaks.toml"
            unread.append({"function": func, "rule": cases.rule_id, "why": why})
            continue
        assert best is not None
        _, cases, found = best
        for tp, credentials in zip(cases.tps, found, strict=True):
            if credentials:
                tps.append({"rule": cases.rule_id, "text": tp,
                            "credentials": sorted({c for _, c in credentials})})
            else:
                unread.append({"function": func, "rule": cases.rule_id,
                               "why": "tp not found by its rule as read here: " + tp[:80]})
        for fp in cases.fps:
            if findings(fp, rules, cases.rule_id):
                # ValidateWithPaths' fps: false only for their file path, which a message lacks.
                unread.append({"function": func, "rule": cases.rule_id,
                               "why": "fp found by its own rule without its file path: " + fp[:80]})
                continue
            flagged_by = sorted({rule_id for rule_id, _ in findings(fp, rules)})
            fps.append({"rule": cases.rule_id, "text": fp, "flagged_by": flagged_by})
    return {
        "source": f"https://github.com/gitleaks/gitleaks/tree/{commit}/{RULES_DIR}",
        "commit": commit,
        "licence": "MIT License, Copyright (c) 2019 Zachary Rice (the cases are gitleaks' test values)",
        "generator": "python -m tests.gitleaks_cases --repo GITLEAKS_GIT_DIR",
        "whole_match": sorted(whole),
        "counts": {"tps": len(tps), "fps": len(fps),
                   "fps_flagged_by_gitleaks": sum(bool(f["flagged_by"]) for f in fps), "unread": len(unread)},
        "unread": unread,
        "tps": tps,
        "fps": fps,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="gitleaks' git directory (a clone or a bare mirror)")
    parser.add_argument("--out", type=Path, default=DATA)
    args = parser.parse_args(argv)
    data = generate(args.repo)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=0, ensure_ascii=False) + "\n")
    print(json.dumps(data["counts"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
