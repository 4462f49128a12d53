"""teacher-replay: collect."""
