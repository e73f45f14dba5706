"""Id-like categorical columns (thousands of levels, a few rows each) through the run command on every engine:
the native engine keeps a bin per level (LightGBM's rule) and splits on category sets as LightGBM does, so it
lands where LightGBM lands. In-process, real engines, real MLflow."""

import json

import pytest

from conftest import run_in_process


@pytest.fixture(scope="module")
def id_csv(tmp_path_factory):
    from qwkboost.data.synthetic import id_frames

    d = tmp_path_factory.mktemp("ids")
    train, test = id_frames(n_train=15_000, n_test=6_000, levels=(1200, 400), seed=5)
    train.to_csv(d / "train.csv", index=False)
    test.to_csv(d / "test.csv", index=False)             # with its labels: the run scores the test file
    return d


def run(engine, id_csv, tmp_path, mlflow_store, categorical="[id_1,id_2]"):
    out = tmp_path / engine
    run_in_process([f"engine={engine}", "objective=squared_error", "data=csv", f"data.path={id_csv / 'train.csv'}",
                    f"data.test_path={id_csv / 'test.csv'}", "data.target=label", "data.id=id",
                    f"data.categorical={categorical}", "cv.n_splits=3", "engine.num_boost_round=1500",
                    "engine.early_stopping_rounds=40", "engine.params.learning_rate=0.2", "n_jobs=1",
                    f"tracking.uri={mlflow_store}", "tracking.experiment_name=id_columns", "tracking.explain=false"], out)
    return json.loads((out / "result.json").read_text())


def test_native_lands_where_lightgbm_lands_on_id_columns(id_csv, tmp_path, mlflow_store):
    native = run("native", id_csv, tmp_path, mlflow_store)
    lgb = run("lightgbm", id_csv, tmp_path, mlflow_store)
    as_numbers = run("native", id_csv, tmp_path / "numbers", mlflow_store, categorical="[]")
    assert native["qwk_thresholds"] > lgb["qwk_thresholds"] - 0.02, (native, lgb)
    assert native["rmse_oof"] < 1.02 * lgb["rmse_oof"], (native, lgb)
    assert native["qwk_thresholds"] > as_numbers["qwk_thresholds"] + 0.05      # the levels carry the signal
