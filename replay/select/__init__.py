"""Stage 2 of a run, select: which states are put to the teachers (`--select`).

Owns: the filters (`filters.parse_filter`: outcome, tool, after-failure, per-trace), the seeded choice,
`selection.json` (the unselected ids) and `filters.asked_states`, the one reader every later stage uses
for the states it asks. The unselected states are counted, never sent.
Must not: ask a teacher or change a state.
Start at `filters.select_into`.
"""
