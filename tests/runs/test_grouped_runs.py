"""Runs on files with several rows per entity: cv.group keeps them honest, the plain run warns, the outputs
record folds and entities, and repeated CV averages splits; all in-process with real engines and MLflow."""

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from conftest import csv_cfg
from model_files import logged_pipeline_files
from qwkboost import tracking
from qwkboost.config import check_config
from qwkboost.data.sources import from_file
from qwkboost.runs.experiment import run_experiment


def test_grouped_cv_brings_oof_and_test_qwk_together_and_the_plain_run_warns(entity_csv, tmp_path):
    train, test = entity_csv
    with pytest.warns(UserWarning, match=r"4,500 of 4,500 training rows \(100%\) have features identical"):
        plain = run_experiment(csv_cfg(train, test), output_dir=tmp_path / "plain")
    grouped = run_experiment(csv_cfg(train, test, group="entity"), output_dir=tmp_path / "grouped")
    # the leak: copies of each validation row in the training folds
    assert plain["qwk_thresholds_oof"] - plain["qwk_thresholds"] > 0.2
    assert abs(grouped["qwk_thresholds_oof"] - grouped["qwk_thresholds"]) < 0.04
    assert grouped["best_iteration_mean"] < plain["best_iteration_mean"]
    assert grouped["qwk_thresholds"] > plain["qwk_thresholds"]
    oof = pd.read_parquet(tmp_path / "grouped" / "oof.parquet")
    assert list(oof.columns) == ["id", "label", "entity", "score", "class", "fold"]
    assert (oof.groupby("entity")["fold"].nunique() == 1).all()
    pipe = json.loads((tmp_path / "grouped" / "pipeline" / "pipeline.json").read_text())
    assert "entity" not in pipe["features"]["names"]         # never a feature


def test_cut_optimism_and_repeats_are_reported(entity_csv, tmp_path, mlflow_store):
    train, test = entity_csv
    exp = tracking.setup(mlflow_store, "grouped_repeats")
    row = run_experiment(csv_cfg(train, test, group="entity", repeats=2, n_splits=3), exp, output_dir=tmp_path)
    assert row["qwk_thresholds_oof_nested"] <= row["qwk_thresholds_oof"]
    assert row["cut_optimism"] == pytest.approx(row["qwk_thresholds_oof"] - row["qwk_thresholds_oof_nested"])
    assert 0 < row["qwk_thresholds_oof_repeat_sd"] < 0.05
    oof = pd.read_parquet(tmp_path / "oof.parquet")
    assert {"fold", "fold_1"} <= set(oof.columns) and not oof["fold"].equals(oof["fold_1"])
    run = mlflow.MlflowClient(mlflow_store).get_run(row["run_id"])
    assert run.data.params["cv.group"] == "entity" and run.data.params["cv.repeats"] == "2"
    assert "cut_optimism" in run.data.metrics
    # the files it read, as MLflow datasets named by the file and sourced from it
    inputs = {d.dataset.name: d.dataset for d in run.inputs.dataset_inputs}
    assert set(inputs) == {Path(train).name, Path(test).name}
    assert {d.source_type for d in inputs.values()} == {"local"} and str(Path(train).resolve()) in \
        inputs[Path(train).name].source
    files = logged_pipeline_files(mlflow.MlflowClient(mlflow_store), row["run_id"])
    assert len([f for f in files if f.startswith("pipeline/fold_")]) == 6    # every fold model of both repeats


def test_a_held_out_test_split_keeps_entities_whole(entity_csv):
    train, _ = entity_csv
    ds = from_file(train, "label", id="id", group="entity", test_size=0.25, seed=3)
    df = pd.read_csv(train).set_index("id")
    test_entities = set(df.loc[ds.ids_test, "entity"])
    assert not test_entities & set(ds.groups_train)
    assert "entity" not in ds.feature_names and len(ds.ids_test) == 3 * len(test_entities)


@pytest.mark.parametrize("change, match", [
    ({"cv": {"group": "entity"}, "data": {"name": "quartiles"}}, "cv.group='entity' names an entity column, but "
                                                                 "data=quartiles is generated"),
    ({"cv": {"repeats": 0}}, "cv.repeats must be an integer >= 1; got 0"),
    ({"cv": {"repeats": 3, "shuffle": False}}, "cv.repeats=3 with cv.shuffle=false"),
    ({"cv": {"group": 5}}, "cv.group must be a column name or null; got 5"),
])
def test_config_checks_groups_and_repeats(tiny_cfg, change, match):
    cfg = dict(tiny_cfg)
    for k, v in change.items():
        cfg[k] = {**cfg[k], **v}
    with pytest.raises(ValueError, match=match):
        check_config(cfg)


@pytest.mark.parametrize("kw, text, match", [
    ({"group": "user"}, "f,user,y\n" + "".join(f"{i},{'' if i == 4 else i // 3},{i % 3}\n" for i in range(30)),
     r"cv.group='user' is missing in 1 row\(s\) of data.path \(first: data row 4\)"),
    ({"group": "user"}, "f,user,y\n" + "".join(f"{i},u,{i % 3}\n" for i in range(30)),
     "cv.group='user' holds a single value"),
    ({"group": "nope"}, "f,user,y\n" + "".join(f"{i},{i // 3},{i % 3}\n" for i in range(30)),
     r"cv.group: \['nope'\] not a column"),
    ({"group": "user", "stratify": True}, "f,user,y\n" + "".join(f"{i},{i // 3},{i % 3}\n" for i in range(30)),
     "data.stratify=true with cv.group='user'"),
    ({"group": "y"}, "f,user,y\n" + "".join(f"{i},{i // 3},{i % 3}\n" for i in range(30)),
     "cv.group='y' is also data.target"),
])
def test_bad_group_columns_are_refused_when_read(tmp_path, kw, text, match):
    p = tmp_path / "d.csv"
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        from_file(str(p), "y", **kw)


def test_estimator_takes_groups_and_repeats(entity_csv):
    from qwkboost import QWKClassifier, qwk

    train, test = entity_csv
    df, dt = pd.read_csv(train), pd.read_csv(test)
    X, y = df.drop(columns=["id", "entity", "label"]), df["label"]
    kw = dict(engine="lightgbm", objective="extended_qwk", params={"verbose": -1, "num_threads": 1},
              num_boost_round=300, early_stopping_rounds=20, n_splits=3)
    with pytest.warns(UserWarning, match="identical"):
        plain = QWKClassifier(**kw).fit(X, y)
    grouped = QWKClassifier(n_repeats=2, **kw).fit(X, y, groups=df["entity"])
    assert len(grouped.pipeline_.models) == 6
    oof_qwk = [qwk(y - 1, np.clip(np.round(m.oof_score_), 1, 4).astype(int) - 1) for m in (plain, grouped)]
    assert oof_qwk[0] > oof_qwk[1] + 0.2          # the plain OOF scores saw copies of their rows
    test_qwk = grouped.score(dt.drop(columns=["id", "entity", "label"]), dt["label"])
    assert abs(test_qwk - qwk(y - 1, np.clip(np.round(grouped.oof_score_), 1, 4).astype(int) - 1)) < 0.08
