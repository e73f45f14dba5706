# One command sets everything up on a machine with only python3.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: run test table demo bench clean mlflow-ui

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

## the main job
run: $(STAMP)
	$(BIN)/python experiments/demo.py

## the test suite
test: $(STAMP)
	$(BIN)/python -m pytest -q

mlflow-ui: $(STAMP)
	$(BIN)/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/mlflow.db

clean:
	rm -rf $(VENV) outputs multirun .pytest_cache
