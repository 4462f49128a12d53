"""Claude Code session logs (~/.claude/projects/**.jsonl) into TraceStates."""
