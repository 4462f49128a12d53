"""teacher-replay: consensus."""
