"""Readers that turn a source into `TraceState`s, one per assistant turn, and the core types themselves.

Owns: the schema every package shares (`schema`: ToolCall, Action, TraceState, Proposal), finding and
reading a `--source` (`sources.iter_states`, one reader per format chosen by content in `detect`:
Claude Code sessions in `claude_code/`, Codex in `codex/`, Gemini, Copilot, trajectories of other agents
in `trajectories/`, collected rollouts in `rollouts` / `claude_rollouts`), budgets (`budget`), outcomes
(`outcome`) and the linear store on disk every consumer reads through (`store.load_states`).
Must not: call an LLM, import any other package of the project but `configs`.
Start at `sources.iter_states` and `schema`.
"""
