"""teacher-replay: ingestion."""
