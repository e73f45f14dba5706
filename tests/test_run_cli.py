"""experiments/run.py as users type it: a single run, 2-job multiruns (sequential and joblib), the table."""

import subprocess
import sys
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from conftest import TINY_OVERRIDES

ROOT = Path(__file__).resolve().parents[1]


def run_cli(tmp_path, *args, script="run.py"):
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / script), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "CI": "true"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def runs(uri, name):
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(name)
    return {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}


def test_single_run(tmp_path, mlflow_store):
    run_cli(tmp_path, *TINY_OVERRIDES, "engine=lightgbm", "objective=squared_error",
            f"tracking.uri={mlflow_store}", "tracking.experiment_name=cli_single")
    got = runs(mlflow_store, "cli_single")
    assert list(got) == ["lightgbm/squared_error"]
    r = got["lightgbm/squared_error"]
    assert r.info.status == "FINISHED" and "mlflow.parentRunId" not in r.data.tags
    assert list(tmp_path.glob("outputs/*/*/result.json"))


@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_two_job_multirun_gives_parent_and_children(tmp_path, mlflow_store, launcher):
    name = f"cli_multirun_{launcher}"
    args = ["-m", *TINY_OVERRIDES, "objective=squared_error,extended_qwk", f"tracking.uri={mlflow_store}",
            f"tracking.experiment_name={name}"]
    if launcher == "joblib":
        args += ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    run_cli(tmp_path, *args)
    got = runs(mlflow_store, name)
    parents = [r for n, r in got.items() if n.startswith("sweep")]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = [r for n, r in got.items() if not n.startswith("sweep")]
    assert sorted(r.info.run_name for r in children) == ["xgboost/extended_qwk", "xgboost/squared_error"]
    for r in children:
        assert r.info.status == "FINISHED"
        assert r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id


def test_failed_job_marks_the_sweep_failed(tmp_path, mlflow_store):
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), "-m", *TINY_OVERRIDES,
                           "engine.params.learning_rate=-1,0.3", f"tracking.uri={mlflow_store}",
                           "tracking.experiment_name=cli_fail"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={**__import__("os").environ, "CI": "true"})
    assert "engine.params.learning_rate must be a number > 0; got -1" in proc.stderr
    got = runs(mlflow_store, "cli_fail")
    parent = next(r for n, r in got.items() if n.startswith("sweep"))
    assert parent.info.status == "FAILED"
    assert all(r.info.status != "RUNNING" for r in got.values())


def test_table_one_command(tmp_path, mlflow_store):
    proc = run_cli(tmp_path, "experiment=qwk_table", "table.engines=[xgboost,lightgbm]", *TINY_OVERRIDES,
                   "objective.params.clip=hold", f"tracking.uri={mlflow_store}", "tracking.experiment_name=cli_table")
    assert "objective.params.clip=hold does not apply" in proc.stdout   # squared error rows have no clip
    csv = next(tmp_path.glob("outputs/*/*/qwk_table.csv"))
    table = pd.read_csv(csv)
    assert list(table.columns) == ["engine", "objective", "qwk_round", "qwk_thresholds", "thresholds", "fit_seconds"]
    assert list(zip(table.engine, table.objective)) == [
        ("xgboost", "squared_error"), ("xgboost", "extended_qwk"),
        ("lightgbm", "squared_error"), ("lightgbm", "extended_qwk")]
    assert table.qwk_thresholds.between(0.3, 1).all()
    md = csv.with_suffix(".md").read_text()
    assert "| engine | objective | qwk_round |" in md and "Bayes ceiling" in md
    got = runs(mlflow_store, "cli_table")
    parent = got.pop("qwk_table")
    assert parent.info.status == "FINISHED" and "bayes_ceiling" in parent.data.metrics
    assert len(got) == 4
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id and r.info.status == "FINISHED"
               for r in got.values())
    assert got["xgboost/extended_qwk"].data.params["objective.params.clip"] == "hold"
    assert "objective.params.clip" not in got["xgboost/squared_error"].data.params
