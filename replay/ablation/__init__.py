"""Teacher-pool ablations of a finished run (`python -m replay.ablate`).

Modules import one way, load → decide → write: `pools` (which pools, their names) and `load` (the
run's settings, states and answers) → `calls` (what only `--allow-calls` may ask), `evaluate` and
`agreement` (each pool's verdicts, the teacher × teacher matrix; pure) → `result` → `export` (one
dataset per pool) and `outputs` (tables, plot) → `run` (the whole ablation) → `summary` (the table
the CLI prints).
"""
