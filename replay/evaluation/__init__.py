"""`python -m replay.eval`: judge a run's data by the student — any model asked at the run's held-out
states, its answers scored against the run.

Modules import one way: `heldout` (which states: the test split's traces, a seeded trace sample, a file)
→ `asking` (the models as a `TeacherPool` on the run's cache and settings; the dry run's estimate) →
`scoring` (each answer against the consensus, the student's action and recovery, the state's tools;
pure) → `statistics` (rates and paired differences with intervals that resample whole traces; pure) →
`results` (the figures per model and pair) → `outputs` (OUT/eval/, swapped in whole) → `run`
(`evaluate`, `plan`) → `summary` (what the CLI prints).
Must not: write outside OUT/eval, call a model but through `teachers/`, define what makes two actions
alike (that is `consensus/`). Start at `run.evaluate`.
"""
