# Each target creates the environment when it is missing; only python3 is needed.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: run test demo table-small mlflow-ui clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,study]'
	touch $(STAMP)

## the main job: the DSB2019 article's QWK table, with the native engine as extra rows
run: $(STAMP)
	$(BIN)/python experiments/run.py experiment=qwk_table

## the test suite (CI runs this through .ci/run)
test: $(STAMP)
	$(BIN)/python -m pytest -q

## quick end-to-end demo without Hydra or MLflow
demo: $(STAMP)
	$(BIN)/python experiments/demo.py

table-small: $(STAMP)
	$(BIN)/python experiments/run.py experiment=qwk_table_small

## the MLflow UI on the project's store, printing links that open on the runs
mlflow-ui: $(STAMP)
	$(BIN)/python experiments/ui.py

clean:
	rm -rf $(VENV) outputs multirun .pytest_cache
