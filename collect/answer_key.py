"""No answer key in the container: the instance's future is made unreachable before the agent's first turn.

SWE-bench-style images have carried the fix: later commits on other branches, tags, remote refs, the
reflog, a stash, or objects left dangling in a pack (SWE-bench #465, mini-swe-agent #787). A student
that runs `git log --all` or `git show <hash>` there earns a reward that poisons every pair built on it.

In /testbed, before the agent starts: every ref but the checked-out branch is deleted (remote refs,
other branches, tags, notes, stash, replace refs), remotes and the *_HEAD files go, reflogs expire, and
`git gc --prune=now` drops every object no ref reaches. Then the same container is checked: only the
branch (or a detached HEAD), no reflog, no commit outside HEAD's ancestry, no unreachable object, HEAD
at the instance's base commit when the row names one. The result goes into the rollout header
(`answer_key`); a check that fails ends the instance before the agent sees it.

The harness grades in a fresh container of the untouched image, so grading sees the repository as it
expects. Egress is the container's network: `none` for the mini agent (the student is asked by the
driver, not from the container), the internal network of the recording proxy for Claude Code.
"""

from __future__ import annotations

import re
import time
from typing import Any

from pydantic import BaseModel

SCRUB = r"""
set -u
cd /testbed || { echo "error=no /testbed"; exit 3; }
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
head=$(git rev-parse --verify -q HEAD) || { echo "error=no git HEAD in /testbed"; exit 3; }
branch=$(git symbolic-ref -q HEAD || true)
removed=0
for ref in $(git for-each-ref --format='%(refname)'); do
    [ "$ref" = "$branch" ] && continue
    git update-ref --no-deref -d "$ref" && removed=$((removed + 1))
done
for remote in $(git remote); do git remote remove "$remote" >/dev/null 2>&1; done
git worktree prune >/dev/null 2>&1
rm -f .git/ORIG_HEAD .git/FETCH_HEAD .git/MERGE_HEAD .git/CHERRY_PICK_HEAD .git/REVERT_HEAD
rm -rf .git/logs .git/refs/original
git -c gc.auto=0 reflog expire --expire=now --expire-unreachable=now --all >/dev/null 2>&1
git -c gc.reflogExpire=now -c gc.reflogExpireUnreachable=now -c gc.pruneExpire=now \
    -c gc.rerereResolved=now -c gc.rerereUnresolved=now gc --prune=now --quiet >/dev/null 2>&1 \
    || echo "gc_failed=1"
echo "head=$head"
echo "branch=$branch"
echo "removed_refs=$removed"
echo "refs=$(git for-each-ref | wc -l)"
echo "reflog=$(git reflog 2>/dev/null | wc -l)"
echo "stash=$(git stash list 2>/dev/null | wc -l)"
echo "remotes=$(git remote | wc -l)"
echo "outside_head=$(git rev-list --all --not HEAD | wc -l)"
echo "unreachable=$(git fsck --connectivity-only --unreachable --no-reflogs --no-progress 2>/dev/null \
    | wc -l)"
if [ -n "${BASE:-}" ]; then
    if [ "$(git rev-parse --verify -q "$BASE^{commit}")" = "$head" ]
    then echo "at_base=1"; else echo "at_base=0"; fi
fi
routes=$(awk 'NR > 1 && $2 == "00000000" {n++} END {print n + 0}' /proc/net/route 2>/dev/null || echo 0)
echo "default_route=$routes"
"""


class AnswerKeyCheck(BaseModel):
    """What the scrub left (rollout header `answer_key`); `ok` means no commit after the base is reachable."""

    ok: bool
    head: str | None = None
    branch: str | None = None
    removed_refs: int = 0
    refs: int = 0                          # refs left: the checked-out branch only (0 on a detached HEAD)
    reflog: int = 0
    stash: int = 0
    remotes: int = 0
    outside_head: int = 0                  # commits some ref reaches that HEAD does not
    unreachable: int = 0                   # objects no ref reaches (left in a pack, dangling)
    at_base: bool | None = None            # HEAD is the row's base_commit; None when the row names none
    network: str = "none"                  # the container's network: its only route out
    internal: bool | None = None           # that network is docker-internal (no forwarding past the host)
    default_route: bool = False            # an internal network's goes to the host (the proxy) only
    elapsed_s: float = 0.0
    error: str | None = None


def base_sha(base_commit: Any) -> str | None:
    """The row's base commit when it is a hash (toy rows say "HEAD").

    >>> base_sha("a1b2c3d4e5"), base_sha("HEAD"), base_sha(None)
    ('a1b2c3d4e5', None, None)
    """
    if isinstance(base_commit, str) and re.fullmatch(r"[0-9a-fA-F]{7,64}", base_commit):
        return base_commit
    return None


def parse_check(output: str, network: str, internal: bool | None = None) -> AnswerKeyCheck:
    """The scrub script's `key=value` lines as a check.

    >>> parse_check("head=abc\\nbranch=refs/heads/main\\nrefs=1\\nreflog=0\\noutside_head=0\\n"
    ...             "unreachable=0\\nat_base=1\\ndefault_route=0\\n", "none").ok
    True
    >>> parse_check("head=abc\\nrefs=2\\noutside_head=1\\n", "none").error
    'still reachable: outside_head, refs'
    >>> parse_check("head=abc\\n", "bridge", internal=False).error
    'still reachable: a route out (network bridge is not internal)'
    >>> parse_check("error=no git HEAD in /testbed\\n", "none").error
    'no git HEAD in /testbed'
    """
    values = dict(line.split("=", 1) for line in output.splitlines() if "=" in line)
    if "error" in values or "head" not in values:
        return AnswerKeyCheck(ok=False, network=network,
                              error=values.get("error") or f"the check printed {output.strip()[-300:]!r}")
    number = {key: int(values.get(key) or 0) for key in
              ("removed_refs", "refs", "reflog", "stash", "remotes", "outside_head", "unreachable")}
    at_base = None if "at_base" not in values else values["at_base"] == "1"
    check = AnswerKeyCheck(ok=False, head=values["head"], branch=values.get("branch") or None, **number,
                           at_base=at_base, network=network, internal=internal,
                           default_route=values.get("default_route", "0") != "0")
    left = [key for key in ("reflog", "stash", "remotes", "outside_head", "unreachable") if number[key]]
    if number["refs"] > (1 if check.branch else 0):
        left.append("refs")
    if at_base is False:
        left.append("HEAD is not the base commit")
    if "gc_failed" in values:
        left.append("git gc failed")
    if network != "none" and internal is not True:
        left.append(f"a route out (network {network} is not internal)")
    check.ok = not left
    check.error = "still reachable: " + ", ".join(left) if left else None
    return check


def scrub(runtime: Any, base_commit: Any, network: str) -> AnswerKeyCheck:
    """Run the scrub and its check in the started container (collect.runtime.Runtime)."""
    started = time.monotonic()
    internal = None
    if network != "none":
        try:
            internal = bool(runtime.client.networks.get(network).attrs.get("Internal"))
        except Exception:  # noqa: BLE001 - unknown counts as not internal: the check fails
            internal = False
    base = base_sha(base_commit)
    argv = ["env", *([f"BASE={base}"] if base else []), "bash", "-c", SCRUB]
    result = runtime.exec_argv(argv, timeout=runtime.config.command_timeout * 5)
    check = parse_check(result.output, network, internal)
    check.elapsed_s = round(time.monotonic() - started, 3)
    return check
