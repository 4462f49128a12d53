"""teacher-replay: configs."""
