"""One experiment end to end on tiny data, logged to a real sqlite MLflow store and read back."""

import json

import mlflow
import numpy as np
import pytest
import yaml

from model_files import logged_model, logged_pipeline_files
from qwkboost import tracking
from qwkboost.cv.crossval import cross_validate
from qwkboost.data.sources import quartiles
from qwkboost.runs.experiment import evaluate, run_experiment
from qwkboost.objectives import SquaredError, register


def test_run_logs_everything(tiny_cfg, mlflow_store, tmp_path):
    exp_id = tracking.setup(mlflow_store, tiny_cfg["tracking"]["experiment_name"])
    row = run_experiment(tiny_cfg, exp_id, output_dir=tmp_path)
    client = mlflow.MlflowClient(mlflow_store)
    run = client.get_run(row["run_id"])
    assert run.info.status == "FINISHED"
    p = run.data.params
    assert p["engine.name"] == "xgboost" and p["engine.params.learning_rate"] == "0.3"
    assert p["objective.params.clip"] == "range" and p["data.n_train"] == "1500"
    versions = dict(v.split("=", 1) for v in run.data.tags["versions"].split())      # one tag, not 14
    assert versions["xgboost"] == __import__("xgboost").__version__ and {"mlflow", "numpy"} <= set(versions)
    assert not any(k.startswith("version.") for k in run.data.tags)
    # parameters that apply: no group of another command, no cluster it did not use, not its own name
    assert not any(k.startswith(("cluster.", "table", "study", "auto", "run_name", "hydra")) for k in p)
    m = run.data.metrics
    for key in ("test_qwk_rounded", "test_qwk", "oof_qwk_rounded", "oof_qwk", "nested_oof_qwk", "test_kappa_tilde",
                "test_rmse", "fit_seconds", "seconds"):
        assert key in m, key
    assert not any(k.startswith(("qwk_", "rmse", "kappa")) for k in m)      # one name per quantity
    assert m["oof_qwk"] >= m["oof_qwk_rounded"] - 1e-12   # exact cuts never lose on OOF
    assert run.data.tags["kind"] == "run"
    # the rows it read, as MLflow datasets digested by qwkboost's fingerprint
    from qwkboost.data.fingerprint import fingerprint
    from qwkboost.runs.experiment import load_dataset

    fp = fingerprint(load_dataset(tiny_cfg["data"], seed=tiny_cfg["seed"]))
    got = {(d.dataset.name, d.dataset.digest, {t.key: t.value for t in d.tags}["mlflow.data.context"])
           for d in run.inputs.dataset_inputs}
    assert got == {("quartiles train", fp.train[:16], "training"), ("quartiles test", fp.test[:16], "testing")}
    curve = client.get_metric_history(row["run_id"], "valid_kappa")
    assert len(curve) > 5 and [c.step for c in curve] == list(range(1, len(curve) + 1))
    assert len(client.get_metric_history(row["run_id"], "train_kappa")) == len(curve)
    arts = {a.path for a in client.list_artifacts(row["run_id"])}
    assert {"config.yaml", "thresholds.json", "metrics.json", "predictions", "plots"} <= arts
    assert "pipeline" not in arts           # the fold models once: in the logged model
    plots = {a.path for a in client.list_artifacts(row["run_id"], "plots")}
    assert plots == {"plots/learning_curves.png", "plots/oof_histograms.png", "plots/confusion_matrix.png"}
    # its servable model: named for what it is, tagged as the run, linked to the final figures (no curve's round)
    model = logged_model(client, row["run_id"])
    assert model.name == "xgboost-extended_qwk"
    assert {k: model.tags[k] for k in ("kind", "engine", "objective")} == {
        "kind": "run", "engine": "xgboost", "objective": "extended_qwk"}
    linked = {x.key: x.value for x in model.metrics}
    assert {k: linked[k] for k in ("oof_qwk", "nested_oof_qwk", "test_qwk")} == pytest.approx(
        {k: m[k] for k in ("oof_qwk", "nested_oof_qwk", "test_qwk")})
    assert all(x.step == 0 for x in model.metrics) and not any(k.startswith(("train_", "valid_")) for k in linked)
    assert model.params["engine.name"] == "xgboost"
    # what decides the result first, the run's machinery last (the order they are logged in)
    logged = yaml.safe_load(open(client.download_artifacts(row["run_id"], "config.yaml")).read())
    assert list(logged)[:2] == ["objective", "engine"] and list(logged)[-1] == "tracking"
    assert logged_pipeline_files(client, row["run_id"]) == {
        "pipeline/pipeline.json", "pipeline/fold_0.zip", "pipeline/fold_1.zip", "pipeline/fold_2.zip"}
    cuts = json.loads(open(client.download_artifacts(row["run_id"], "thresholds.json")).read())["cuts"]
    assert cuts == row["thresholds"] and len(cuts) == 3 and cuts == sorted(cuts)
    assert json.loads((tmp_path / "result.json").read_text())["run_id"] == row["run_id"]


def test_logged_fold_model_reloads_and_predicts(tiny_cfg, mlflow_store, tmp_path):
    import qwkboost as qb

    exp_id = tracking.setup(mlflow_store, tiny_cfg["tracking"]["experiment_name"])
    row = run_experiment(tiny_cfg, exp_id)
    path = tracking.download_pipeline(row["run_id"], mlflow_store, tmp_path) / "fold_0.zip"
    model = qb.load_model(path)
    X = quartiles(n_train=10, n_test=10).X_test
    pred = model.predict(X)
    assert pred.shape == (10,) and np.all(np.isfinite(pred))


class _Explodes(SquaredError):
    def grad_hess(self, y, score):
        raise RuntimeError("the objective blew up in round 1")


register("explodes_in_training", _Explodes, overwrite=True)


def test_crashed_run_is_marked_failed(tiny_cfg, mlflow_store):
    exp_id = tracking.setup(mlflow_store, tiny_cfg["tracking"]["experiment_name"])
    tiny_cfg["objective"] = {"name": "explodes_in_training", "params": {}}   # raises inside the run
    with pytest.raises(RuntimeError, match="blew up"):
        run_experiment(tiny_cfg, exp_id)
    client = mlflow.MlflowClient(mlflow_store)
    runs = client.search_runs([exp_id])
    assert len(runs) == 1 and runs[0].info.status == "FAILED"
    assert mlflow.active_run() is None


def test_bad_values_fail_before_any_run_starts(tiny_cfg, mlflow_store):
    exp_id = tracking.setup(mlflow_store, tiny_cfg["tracking"]["experiment_name"])
    tiny_cfg["objective"]["params"]["hessian"] = "bogus"
    with pytest.raises(ValueError, match="hessian must be one of"):
        run_experiment(tiny_cfg, exp_id)
    tiny_cfg["objective"]["params"]["hessian"] = "constant"
    tiny_cfg["engine"]["params"]["max_dept"] = 3
    with pytest.raises(ValueError, match=r"engine.params \(xgboost\): unknown xgboost parameter\(s\) \['max_dept'\] "
                                         r"\('max_dept': did you mean 'max_depth'"):
        run_experiment(tiny_cfg, exp_id)
    assert mlflow.MlflowClient(mlflow_store).search_runs([exp_id]) == []


def test_no_run_leaks_into_the_next(tiny_cfg, mlflow_store):
    exp_id = tracking.setup(mlflow_store, tiny_cfg["tracking"]["experiment_name"])
    mlflow.start_run(experiment_id=exp_id, run_name="left open by a previous job")
    row = run_experiment(tiny_cfg, exp_id)
    client = mlflow.MlflowClient(mlflow_store)
    runs = {r.info.run_name: r for r in client.search_runs([exp_id])}
    assert runs["left open by a previous job"].info.status == "KILLED"
    assert "mlflow.parentRunId" not in client.get_run(row["run_id"]).data.tags
    assert mlflow.active_run() is None


@pytest.mark.parametrize("method", ["exact", "nelder_mead", "distribution", "round"])
def test_labels_on_their_own_scale(small_quartiles, method):
    ds = small_quartiles
    shifted = type(ds)(ds.X_train, ds.y_train + 3, ds.X_test, ds.y_test + 3, ds.feature_names,
                       ds.classes + 3, "shifted")
    kw = dict(engine="lightgbm", objective="extended_qwk", params={"learning_rate": 0.2, "verbose": -1},
              num_boost_round=40, early_stopping_rounds=10, n_splits=3)
    a = evaluate(ds, cross_validate(ds.X_train, ds.y_train, ds.X_test, **kw), method)
    b = evaluate(shifted, cross_validate(shifted.X_train, shifted.y_train, shifted.X_test, **kw), method)
    for k in ("qwk_round", "qwk_thresholds", "qwk_thresholds_oof"):
        assert b.metrics[k] == pytest.approx(a.metrics[k], abs=1e-9)
    np.testing.assert_allclose(b.cuts, a.cuts + 3, atol=1e-4)
    assert list(b.classes) == [3, 4, 5, 6]


def test_regression_target_reports_rmse_only(tiny_cfg):
    tiny_cfg["data"] = {"name": "chisq", "n": 300, "n_features": 10, "test_size": 0.2, "seed": 1}
    tiny_cfg["objective"] = {"name": "squared_error", "params": {}}
    row = run_experiment(tiny_cfg, None)
    assert row["thresholds"] is None and "qwk_round" not in row and row["rmse"] > 0


def test_thresholds_json_gives_labels_as_the_readme_shows(tmp_path, mlflow_store):
    """Cuts in thresholds.json are on the labels' scale; with its classes they give labels 1..5, not 0..4."""
    import pandas as pd

    from qwkboost.evaluation.thresholds import apply_thresholds

    ds = quartiles(n_train=2500, n_test=10, n_classes=5)
    df = pd.DataFrame(ds.X_train, columns=ds.feature_names).assign(rating=ds.y_train.astype(int) + 1)
    df.to_csv(tmp_path / "train.csv", index=False)
    cfg = {"data": {"name": "csv", "path": str(tmp_path / "train.csv"), "target": "rating", "test_size": 0.2},
           "engine": {"name": "lightgbm", "num_boost_round": 60, "early_stopping_rounds": 10,
                      "params": {"learning_rate": 0.3}},
           "objective": {"name": "extended_qwk", "params": {}}, "cv": {"n_splits": 3},
           "thresholds": {"method": "exact"}, "seed": 0,
           "tracking": {"uri": mlflow_store, "experiment_name": "readme_thresholds"}}
    exp_id = tracking.setup(mlflow_store, "readme_thresholds")
    row = run_experiment(cfg, exp_id)
    t = json.loads(open(mlflow.MlflowClient(mlflow_store).download_artifacts(row["run_id"], "thresholds.json")).read())
    assert t["classes"] == [1, 2, 3, 4, 5] and len(t["cuts"]) == 4
    # the same data and protocol as the run: its test classes come out on the labels' scale
    data = __import__("qwkboost.runs.experiment", fromlist=["load_dataset"]).load_dataset(cfg["data"], 0)
    cv = cross_validate(data.X_train, data.y_train, data.X_test, engine="lightgbm", objective="extended_qwk",
                        params={"learning_rate": 0.3}, num_boost_round=60, early_stopping_rounds=10, n_splits=3,
                        early_stopping_on=None)     # the runs' setting, as the run above
    ev = evaluate(data, cv, "exact")
    labels = apply_thresholds(cv.test, t["cuts"], classes=t["classes"])
    np.testing.assert_array_equal(labels, ev.test_classes)
    assert set(labels) <= {1, 2, 3, 4, 5} and labels.min() >= 1


def test_a_run_that_fails_while_logging_leaves_no_explanation_folder(tiny_cfg, tmp_path, monkeypatch):
    import tempfile
    import time

    from qwkboost import tracking
    from qwkboost.runs import experiment

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cfg = {**tiny_cfg, "tracking": {**tiny_cfg["tracking"], "explain": True, "explain_rows": 200}}

    def lost(*args, **kwargs):      # a store that goes away while the run logs its plots
        raise RuntimeError("the store went away")

    monkeypatch.setattr(experiment.plots, "learning_curves", lost)
    with pytest.raises(RuntimeError, match="the store went away"):
        experiment.run_experiment(cfg, tracking.setup(cfg["tracking"]["uri"], cfg["tracking"]["experiment_name"]))
    deadline = time.monotonic() + 120       # the explaining thread ends on its own; its folder goes with it
    while list(tmp_path.glob("qwkboost-explain-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not list(tmp_path.glob("qwkboost-explain-*"))
