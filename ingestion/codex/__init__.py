"""Codex CLI rollouts (ingestion/codex/reader.py)."""

from ingestion.codex.reader import codex_states

__all__ = ["codex_states"]
