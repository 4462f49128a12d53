"""teacher-replay's pipeline and command lines: wires `ingestion`, `teachers` and `consensus` into a run.

A run's stages are packages, in order: `ingest` (the source → states.jsonl + traces.jsonl, redacted)
→ `select` (which states are asked) → `ask` (the teacher pool's proposals) → `decide` (consensus,
verdicts, pair rows) → `export` (the dataset, pairs.jsonl, the card); `pipeline.run` calls them in turn
inside the run folder (`rundir`: atomic files, the swap-in, report.json). After a run: `ablation`
(other teacher pools from the run's cache), `verification` (a run's rollout pairs checked by what happens
next, through `collect.branch`) and `view` (static pages of a run).
Entry points: `python -m replay.run` (`run.main`), `python -m replay.ablate`, `python -m replay.verify`,
`python -m replay.view`, `python -m replay.states`.
Must not: parse a source format (`ingestion/`), call an LLM but through `teachers/`, define what makes
two actions equivalent (`consensus/`). Libraries elsewhere never import `replay`.
"""
