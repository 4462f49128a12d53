"""teacher-replay: replay."""
