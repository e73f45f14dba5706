"""The MLflow UI as a user opens it: a real ``mlflow ui`` on 127.0.0.1 serving a store that qwkboost's runs
filled (two runs under a sweep's parent, and their blend), read by headless Chromium.

The pages are read from the DOM Chromium renders (``--dump-dom``): the runs table from the experiment's printed
link (the starting view: the headline columns, best out-of-fold QWK first), the compare page of two runs, and the
blend's logged model with the figures it is linked to."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

import mlflow
import pytest
import requests

from conftest import csv_cfg
from model_files import logged_model
from qwkboost import tracking
from qwkboost.blending import blend, log_blend, write_blend
from qwkboost.runs.experiment import run_experiment

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium)")]
MLFLOW = Path(sys.executable).with_name("mlflow")
MEMBERS = [("lightgbm", "squared_error"), ("xgboost", "extended_qwk")]
#: a page's scripts fetch the runs from the server: Chromium's virtual time waits for them, this long at most
BUDGETS_MS = (15_000, 40_000, 90_000)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ui(entity_csv, tmp_path_factory):
    """The store (two runs under a sweep's parent, their blend) and ``mlflow ui`` serving it."""
    train, test = entity_csv
    root = tmp_path_factory.mktemp("mlflow_ui")
    uri = f"sqlite:///{root}/mlflow.db"
    exp = tracking.setup(uri, "compare")
    rows, dirs = [], []
    try:
        with tracking.run(exp, "sweep engine=lightgbm,xgboost", tags={"kind": "sweep"}) as parent:
            for engine, objective in MEMBERS:
                dirs.append(root / f"{engine}-{objective}")
                rows.append(run_experiment(csv_cfg(train, test, engine, objective, group="entity"), exp,
                                           parent_run_id=parent.info.run_id, run_name=f"{engine}/{objective}",
                                           output_dir=dirs[-1]))
        result = blend([str(d) for d in dirs])
        write_blend(result, root / "blend")
        blend_id = log_blend(result, root / "blend", exp)
    finally:
        mlflow.set_tracking_uri(None)
    port = _free_port()
    env = {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}      # no background job runners (seven processes)
    with open(root / "ui.log", "w") as log:
        proc = subprocess.Popen([str(MLFLOW), "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
                                 "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, (root / "ui.log").read_text()[-3000:]
            try:
                if requests.get(base + "/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.time() < deadline, "mlflow ui did not answer /health in 120 s"
            time.sleep(0.3)
        yield {"base": base, "exp": exp, "rows": rows, "blend": blend_id, "result": result,
               "client": mlflow.MlflowClient(uri)}
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


def dom(url: str, ready) -> str:
    """The DOM Chromium renders for ``url``, once ``ready(html)`` holds (a longer virtual time if not)."""
    for budget in BUDGETS_MS:
        with tempfile.TemporaryDirectory() as profile:
            html = subprocess.run(
                [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", f"--virtual-time-budget={budget}", "--window-size=1600,1000",
                 "--dump-dom", url], capture_output=True, text=True, timeout=300).stdout
        if ready(html):
            return html
    raise AssertionError(f"{url} did not render what was expected within {BUDGETS_MS[-1]} ms of virtual time:\n"
                         f"{html[-3000:]}")


class Grid(HTMLParser):
    """The text of an AG Grid table: ``rows[row-index][col-id]``, the pinned and the scrolled parts merged, and the
    columns' places as shown (``headers[col-id]``: the grid's ``aria-colindex``; its DOM order is not the view's)."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self, html: str):
        super().__init__()
        self.stack: list[tuple[str, str | None, str | None]] = []
        self.rows: dict[int, dict[str, str]] = {}
        self.headers: dict[str, int] = {}
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("role") == "columnheader" and a.get("col-id") and a.get("aria-colindex"):
            self.headers[a["col-id"]] = int(a["aria-colindex"])
        if tag in self.VOID:
            return
        row = a.get("row-index") if a.get("role") == "row" else None
        cell = a.get("col-id") if a.get("role") == "gridcell" else None
        self.stack.append((tag, row, cell))

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        row = next((r for _, r, _ in reversed(self.stack) if r is not None), None)
        cell = next((c for _, _, c in reversed(self.stack) if c is not None), None)
        if row is not None and cell is not None and data.strip():
            cells = self.rows.setdefault(int(row), {})
            cells[cell] = (cells.get(cell, "") + " " + data.strip()).strip()


def test_the_printed_experiment_link_opens_the_runs_ranked_by_the_headline_columns(ui):
    link = tracking.ui_link(ui["base"], ui["exp"])
    names = ["blend", "lightgbm/squared_error", "xgboost/extended_qwk", "sweep engine=lightgbm,xgboost"]
    html = dom(link, lambda h: all(n in h for n in names) and "metrics.`oof_qwk`" in h)
    grid = Grid(html)
    # the headline columns, shown without a click, in the vocabulary's order, then the kind of run
    shown = sorted((h for h in grid.headers if h.startswith(("metrics.", "tags."))), key=grid.headers.get)
    assert shown[:5] == ["metrics.`oof_qwk`", "metrics.`nested_oof_qwk`", "metrics.`test_qwk`", "metrics.`seconds`",
                         "tags.`kind`"]
    # a run's name after its colour swatch (``#b45091 blend``)
    runs = {cells["attributes.`Run Name`"].split(" ", 1)[-1]: cells for cells in grid.rows.values()
            if "attributes.`Run Name`" in cells}
    assert set(names) <= set(runs)
    assert {runs[n]["tags.`kind`"] for n in names} == {"blend", "run", "sweep"}
    # runs of every kind in one column, ranked best first, with their seconds
    order = [cells for _, cells in sorted(grid.rows.items()) if "attributes.`Run Name`" in cells]
    ranked = [float(c["metrics.`oof_qwk`"]) for c in order if c.get("metrics.`oof_qwk`", "-") != "-"]
    assert len(ranked) == 3 and ranked == sorted(ranked, reverse=True)
    assert all(float(runs[n]["metrics.`seconds`"]) > 0 for n in names[:3])
    client = ui["client"]
    for n in names[:3]:
        run = client.search_runs([ui["exp"]], f"attributes.run_name = '{n}'")[0]
        assert float(runs[n]["metrics.`oof_qwk`"]) == pytest.approx(run.data.metrics["oof_qwk"], abs=1e-6)


def test_the_chart_view_opens_on_the_qwk_charts_with_every_other_metric_folded_below(ui):
    link = tracking.ui_link(ui["base"], ui["exp"]) + "&compareRunsMode=CHART"
    html = dom(link, lambda h: "seconds vs. nested_oof_qwk" in h and "Model metrics" in h)
    # the chart sections as the page titles them: name (number of charts)
    sections = re.findall(r">([^<>]+)</div><div [^>]*>\((\d+)\)<", html)
    assert sections[0] == ("QWK", "3") and "Model metrics" in dict(sections)
    assert "Parallel Coordinates" in html and ">oof_qwk<" in html
    # a blend's member keys hold no "/", which the UI would read as a section of its own (weight.lightgbm)
    assert not any(name.startswith(("weight.", "member.")) for name, _ in sections), sections


def test_the_compare_page_shows_two_runs_side_by_side_on_the_model_training_pages(ui):
    ids = [r["run_id"] for r in ui["rows"]]
    link = (f"{ui['base']}/#/compare-runs?runs={json.dumps(ids)}&experiments={json.dumps([ui['exp']])}"
            "&workflowType=machine_learning")
    html = dom(link, lambda h: "lightgbm/squared_error" in h and "xgboost/extended_qwk" in h and "oof_qwk" in h)
    text = html
    for key in ("oof_qwk", "nested_oof_qwk", "test_qwk", "engine.name", "objective.name"):
        assert key in text, key
    # the model-training sidebar (Home, Experiments, Model registry), not GenAI's (Prompts, AI Gateway, ...), which a
    # link without workflowType opens on
    assert "Model registry" in text and "AI Gateway" not in text and "Prompts" not in text


def test_the_blends_logged_model_shows_the_figures_of_the_run(ui):
    client = ui["client"]
    model = logged_model(client, ui["blend"])
    link = f"{ui['base']}/#/experiments/{ui['exp']}/models/{model.model_id}?workflowType=machine_learning"
    html = dom(link, lambda h: "nested_oof_qwk" in h)
    run = client.get_run(ui["blend"])
    assert model.name in html
    figure = run.data.metrics["nested_oof_qwk"]
    # the run's final figure (never a curve's first point), as the page prints it
    assert any(f"{figure:.{d}f}" in html for d in range(3, 8)), figure
    assert "valid_" not in html
