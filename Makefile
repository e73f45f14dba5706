# Each target creates the environment when it is missing; only python3 is needed.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: run test docs mathjax demo table-small study study-large mlflow-ui clean

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

## the documentation site, built strictly (broken links, missing references, bad docstrings fail) into site/;
## its formulas render offline with MathJax from npm where npm is installed (else the page loads it from a CDN)
MATHJAX := docs/javascripts/tex-svg.js
docs: $(STAMP)
	@test -f $(MATHJAX) || $(MAKE) --no-print-directory mathjax || echo "MathJax not fetched: the site loads it from a CDN"
	if [ -f $(MATHJAX) ]; then export QWKBOOST_MATHJAX=javascripts/tex-svg.js; fi; \
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

mathjax:
	command -v npm > /dev/null
	mkdir -p $(dir $(MATHJAX))
	d=$$(mktemp -d) && cd $$d && npm pack --silent mathjax@3.2.2 > /dev/null && \
	tar -xzf mathjax-3.2.2.tgz package/es5/tex-svg.js && cd - > /dev/null && \
	cp $$d/package/es5/tex-svg.js $(MATHJAX) && rm -rf $$d

## quick end-to-end demo without Hydra or MLflow
demo: $(STAMP)
	$(BIN)/python experiments/demo.py

## the multi-seed study of every ordinal method (experiment=study; about 33 minutes on 2 cores, resumable)
study: $(STAMP)
	$(BIN)/python experiments/run.py experiment=study

## the study at competition size: five real sets of 17,000 to 73,000 rows, defaults and tuned, then InstEval at
## four training sizes (about 40 minutes on 2 cores; resumes)
study-large: $(STAMP)
	$(BIN)/python experiments/run.py experiment=study_large
	$(BIN)/python experiments/run.py experiment=study_sizes

table-small: $(STAMP)
	$(BIN)/python experiments/run.py experiment=qwk_table_small

## the MLflow UI on the project's store, printing links that open on the runs
mlflow-ui: $(STAMP)
	$(BIN)/python experiments/ui.py

clean:
	rm -rf $(VENV) outputs multirun .pytest_cache site
