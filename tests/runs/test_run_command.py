"""What ``experiments/run.py`` and ``tune.py`` compute and refuse, run in-process on configs composed as their
command lines compose them (:func:`conftest.run_in_process`); the processes themselves (exit codes, stderr,
signals, launchers) are tested in test_run_cli.py."""

import logging

import mlflow
import pandas as pd
import pytest

from conftest import TINY_OVERRIDES, run_in_process
from qwkboost.exceptions import ConfigError


def runs(uri, name):
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(name)
    return {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}


def test_table_one_command(tmp_path, mlflow_store, caplog):
    out = tmp_path / "out"
    with caplog.at_level(logging.INFO, logger="qwkboost"):
        run_in_process(["experiment=qwk_table", "table.engines=[xgboost,lightgbm]", *TINY_OVERRIDES,
                        "objective=extended_qwk", "objective.params.clip=hold", f"tracking.uri={mlflow_store}",
                        "tracking.experiment_name=inproc_table"], out)
    assert "objective.params.clip=hold does not apply" in caplog.text   # squared error rows have no clip
    table = pd.read_csv(out / "qwk_table.csv")
    # other data and sizes than the article's: its figures are not shown beside ours
    assert list(table.columns) == ["engine", "objective", "qwk_round", "qwk_thresholds", "thresholds", "fit_seconds"]
    assert list(zip(table.engine, table.objective)) == [
        ("xgboost", "squared_error"), ("xgboost", "extended_qwk"),
        ("lightgbm", "squared_error"), ("lightgbm", "extended_qwk")]
    assert table.qwk_thresholds.between(0.3, 1).all()
    md = (out / "qwk_table.md").read_text()
    assert "| engine | objective | qwk_round |" in md and "Bayes ceiling" in md and "article" not in md
    got = runs(mlflow_store, "inproc_table")
    parent = got.pop("qwk_table")
    assert parent.info.status == "FINISHED" and "bayes_ceiling" in parent.data.metrics
    assert len(got) == 4
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id and r.info.status == "FINISHED"
               for r in got.values())
    assert got["xgboost/extended_qwk"].data.params["objective.params.clip"] == "hold"
    assert "objective.params.clip" not in got["xgboost/squared_error"].data.params


def test_run_name_cannot_escape_the_output_directory(tmp_path, mlflow_store):
    out = tmp_path / "work" / "outputs" / "run"
    run_in_process(["experiment=qwk_table", "table.engines=[xgboost]", "table.objectives=[squared_error]",
                    *TINY_OVERRIDES, "run_name=../../x", f"tracking.uri={mlflow_store}",
                    "tracking.experiment_name=inproc_escape"], out)
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.csv")}
    assert written and all(p.startswith("work/outputs/run/") for p in written), written
    assert any(p.endswith("/x.csv") for p in written)


def test_single_run_returns_the_optimized_metric(tmp_path, mlflow_store):
    value = run_in_process([*TINY_OVERRIDES, "engine=lightgbm", "objective=squared_error",
                            f"tracking.uri={mlflow_store}", "tracking.experiment_name=inproc_single"], tmp_path)
    result = pd.read_json(tmp_path / "result.json", typ="series")
    assert value == pytest.approx(result["qwk_thresholds_oof"]) and 0.3 < value <= 1


def test_duplicate_target_column_does_not_leak(tmp_path, mlflow_store):
    """A repeated target column became a feature (pandas renamed it y.1): test QWK 1.0 on random labels."""
    import numpy as np

    rs = np.random.RandomState(0)
    y = rs.randint(0, 4, 300)
    pd.DataFrame({"f1": rs.rand(300), "f2": rs.rand(300), "y": y, "y2": y}).rename(columns={"y2": "y"}) \
        .to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ConfigError, match=r"duplicate column names \['y'\]"):
        run_in_process(["data=csv", f"data.path={tmp_path / 'd.csv'}", "data.target=y", "cv.n_splits=3",
                        f"tracking.uri={mlflow_store}"], tmp_path / "out")


@pytest.mark.parametrize("args, message", [
    (["tune.max_retry=-1"], "tune.max_retry must be an integer >= 0; got -1"),
    (["tune.heartbeat_interval=abc"], "tune.heartbeat_interval must be an integer >= 1; got 'abc'"),
    (["engine=xgboost", "+engine.search_space.foo={type:int,low:1,high:3}"],
     "engine.search_space.foo=1: unknown xgboost parameter"),
    (["engine=xgboost", "engine.search_space.max_depth.low=-5", "engine.search_space.max_depth.high=-4"],
     "engine.search_space.max_depth=-5: xgboost rejected the parameters"),
    (["engine.search_space.learning_rate.log=maybe"], "engine.search_space.learning_rate.log must be true or false"),
])
def test_bad_tuning_input_is_refused_before_any_trial(tmp_path, mlflow_store, args, message):
    with pytest.raises(ConfigError) as err:
        run_in_process([*TINY_OVERRIDES, *args, f"tracking.uri={mlflow_store}", "tune.n_trials=1",
                        f"tune.storage=sqlite:///{tmp_path}/optuna.db"], tmp_path / "out", config_name="tune")
    assert message in str(err.value)
    assert not (tmp_path / "optuna.db").exists() or "trial" not in str(err.value)


@pytest.mark.parametrize("args, message", [
    (["engine=xgboost", "+engine.params.max_dept=3"],
     "unknown xgboost parameter(s) ['max_dept'] ('max_dept': did you mean 'max_depth'"),
    (["engine=lightgbm", "+engine.params.num_leavs=8"], "unknown lightgbm parameter(s) ['num_leavs']"),
    (["engine=native", "+engine.params.max_dept=3"], "unknown native-engine parameter 'max_dept'"),
    (["seed=abc"], "seed must be an integer in [0, 2147483644]; got 'abc'"),
    (["engine=xgboost", "engine.params.base_score=high"],
     "engine.params.base_score must be a number or null; got 'high'"),
    (["data.n_train=0"], "data.n_train must be an integer >= 2; got 0"),
    (["data=chisq", "objective=extended_qwk"],
     "objective=extended_qwk needs ordinal labels, but data=chisq is a regression target"),
    (["engine=lightgbm", "engine.params.min_child_samples=20", "data.n_train=50"],
         "lightgbm can split no feature of these 33 training rows with min_child_samples=20"),
    (["cv.shuffle=no"], "cv.shuffle must be true or false; got 'no'"),
    (["data.n_test=1"], "the 1 test row(s) hold a single class"),
    (["+cv.foo=1"], "cv has no setting(s) ['foo']; its settings are: n_splits, stratified, shuffle"),
    (["+data.n_trian=10"], "data=quartiles has no setting(s) ['n_trian']"),
    (["data.n_classes=2.5"], "data.n_classes must be an integer in [2, 1000]; got 2.5"),
    (["data.seed=-1"], "data.seed must be an integer in [0, 2147483647]; got -1"),
    (["data.n_visible=0"], "data.n_visible must be an integer >= 1; got 0"),
    (["cv.n_splits=1000"], "cv.n_splits=1000 exceeds the smallest class count (375) of label 0; use cv.n_splits=375"),
    (["objective=extended_qwk", "objective.params.a=1e308"],
     "a (the target label mean) must lie within the labels' range [0, 3]"),
    (["tracking.experiment_name=''"], "tracking.experiment_name must be a non-empty name"),
    (["tracking.uri=sqlite:///relative/mlflow.db"], "is a path relative to the working directory"),
    (["tracking.uri=mysql://u@127.0.0.1:1/db"], "needs a database driver that is not installed"),
    (["experiment=qwk_table", "table.engines=[]"], "table.engines must be a non-empty list"),
    (["cv.repeats=0"], "cv.repeats must be an integer >= 1"),
    (["cv.repeats=2", "cv.shuffle=false"], "cv.repeats=2 with cv.shuffle=false repeats one split 2 times"),
    (["cv.group=entity"], "cv.group"),
])
def test_bad_input_is_refused_before_training(tmp_path, mlflow_store, args, message):
    base = [] if "data=chisq" in args else TINY_OVERRIDES
    tracking = [a for a in (f"tracking.uri={mlflow_store}", "tracking.experiment_name=inproc_bad")
                if a.split("=")[0] not in {x.split("=")[0] for x in args}]
    with pytest.raises(ConfigError) as err:
        run_in_process([*base, *args, *tracking], tmp_path / "out")
    assert message in str(err.value)
    assert not (tmp_path / "out" / "result.json").exists()
