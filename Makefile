# Each target creates the environment when it is missing; only python3 is needed.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: run test docs demo table-small study mlflow-ui clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,study,cluster,docs]'
	touch $(STAMP)

## the main job: the DSB2019 article's QWK table, with the native engine as extra rows
run: $(STAMP)
	$(BIN)/python experiments/run.py experiment=qwk_table

## the test suite, one worker per core (CI runs this through .ci/run); plain `pytest` runs it in one process
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto

## the documentation site, built strictly (broken links, missing references, bad docstrings fail) into site/
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## quick end-to-end demo without Hydra or MLflow
demo: $(STAMP)
	$(BIN)/python experiments/demo.py

## the multi-seed study of every ordinal method (experiment=study; about 33 minutes on 2 cores, resumable)
study: $(STAMP)
	$(BIN)/python experiments/run.py experiment=study

table-small: $(STAMP)
	$(BIN)/python experiments/run.py experiment=qwk_table_small

## the MLflow UI on the project's store, printing links that open on the runs
mlflow-ui: $(STAMP)
	$(BIN)/python experiments/ui.py

clean:
	rm -rf $(VENV) outputs multirun .pytest_cache site
