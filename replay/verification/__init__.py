"""`python -m replay.verify`: a run's pairs from collected rollouts, checked by what happens next.

For each pair whose state comes from a rollout, `collect.branch` restores the state in a fresh container,
takes the teachers' consensus there (and, apart, the student's own action), lets the same student go on
and grades the patch; N samples each. Here: which pairs and branches (`plan`), what is graded already
(`ledger`, OUT/verify/branches.jsonl: a rerun repeats no graded branch), what the rewards mean (`values`:
each action's mean reward with its interval, the pair verified / flipped / tied), the rows and labels
that follow (`rows`) and the run folder's files rewritten (`outputs`). `run.verify` wires them.
Must not: touch a container or the student (that is `collect/`), decide a consensus (that is the run's).
Start at `run.verify`.
"""
