# The README's two set-up commands. Both create .venv; torch 2.13.0 goes in first so nothing
# else pulls a CUDA build.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Your own Claude Code sessions when you have some, else the small ones committed in examples/.
# "Some" means a session file under ~/.claude/projects: the CLI creates the folder before the first
# session, and an empty folder would make the run exit 2 (no session files).
PROJECTS := $(HOME)/.claude/projects
HAS_SESSIONS := $(shell find -L "$(PROJECTS)" \( -name '*.jsonl' -o -name '*.jsonl.gz' \) -type f 2>/dev/null | head -n 1)
SOURCE ?= $(if $(HAS_SESSIONS),$(PROJECTS),examples/sessions)
OUT ?= replay-out
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: run dev test sessions

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Installed once per change of pyproject.toml (a stamp file in .venv): `make run` after `make test`, or a
# second `make run`, goes straight to the dry run and asks no package index.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

run: $(VENV)/.installed
	@$(if $(HAS_SESSIONS),,$(if $(filter examples/sessions,$(SOURCE)),echo "No Claude Code session under $(PROJECTS) yet: using the examples in examples/sessions (SOURCE=... to pick another folder)"))
	@echo "replay.run --source $(SOURCE) (a dry run: states and a cost estimate, no calls)"
	$(BIN)/python -m replay.run --source $(SOURCE) --out $(OUT) --teachers gpt-5,deepseek --dry-run

# The dev extra, once per change of pyproject.toml (a stamp file in .venv, as for `make run`).
$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]"
	touch $(VENV)/.installed $@

dev: $(VENV)/.dev

# Tests spend much of their time waiting on subprocesses and loopback servers, so pytest-xdist runs more
# workers than cores: on CI's 2 cores 4 workers keep both busy (docs/benchmarks.md, "CI"). TEST_WORKERS=0
# runs them in one process.
TEST_WORKERS ?= 4
test: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -rs -n $(TEST_WORKERS)   # -rs: each skipped test says why (e.g. no ../shared)

# Regenerate examples/sessions/ with the real Claude Code CLI (fetched once from npm) and a scripted
# Anthropic server on 127.0.0.1.
sessions: $(VENV)/.installed
	$(BIN)/python -m collect.claude_code_cli fetch
	$(BIN)/python examples/make_sessions.py
