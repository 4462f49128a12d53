"""Stage 4 of a run, decide: each state's proposals → a consensus → a verdict, and a pair row.

Owns: the loop over states (`states.replay_states`: one trace's states in turn order, traces
concurrently, each state decided as soon as its answers are in), one state's consensus (`consensus`:
the --consensus method, or the LLM judge), each verdict's record (`verdicts`, verdicts.jsonl),
hindsight agreement with the student's own recoveries (`hindsight`), and the stage over a whole run
(`run.decide_states`: proposals.jsonl, verdicts.jsonl, the report's counts).
Must not: define what makes two actions equivalent (that is `consensus/`), write the dataset (that is
`replay/export/`).
Start at `run.decide_states`.
"""
