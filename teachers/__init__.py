"""teacher-replay: teachers."""
