# The README's two set-up commands. Both create .venv; torch 2.13.0 goes in first so nothing
# else pulls a CUDA build.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
FIXTURES ?= ../shared/fixtures/claude_code/projects
OUT ?= replay-out

.PHONY: run test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

run: $(BIN)/python
	$(BIN)/pip install -q -e .
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python -m replay.run --source $(FIXTURES) --out $(OUT) --teachers gpt-5,deepseek --dry-run

test: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]"
	$(BIN)/ruff check .
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python -m pytest
