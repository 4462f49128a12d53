"""Stage 1 of a run, ingest: `--source` → the run folder's `states.jsonl` + `traces.jsonl`, redacted.

Owns: reading the source on every core (`parallel`: files read, redacted and serialised by worker
processes, appended in file order, the same bytes one process writes), the one redaction pass every
later stage and output sees (`read.ingest_to_file`), and the redaction key (`redaction`).
Must not: parse any source format itself (that is `ingestion/`), call a teacher.
Start at `read.ingest_to_file`.
"""
