"""qb.explain on every engine, for a model, a run's fold ensemble and a blend: the values plus the bias are the
raw score (initial score, label offset, missing values and categories included); importances; the ordinal view;
what a run logs; a planted leak comes out on top."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from qwkboost.explanations import row_path

ENGINES = ["xgboost", "lightgbm", "native", "catboost"]


@pytest.fixture(scope="module")
def frame():
    """Four numeric columns (missing values in one) and a string column; labels 1..4."""
    rs = np.random.RandomState(0)
    n = 2400
    X = pd.DataFrame(rs.rand(n, 4), columns=["a", "b", "c", "d"])
    X["city"] = rs.choice([f"c{i}" for i in range(12)], n)
    s = X["a"] + X["b"] - X["c"] + 0.3 * (X["city"].str[1:].astype(int) % 3) + 0.2 * rs.randn(n)
    y = np.digitize(s, np.quantile(s, [0.25, 0.5, 0.75])) + 1.0
    X.loc[rs.rand(n) < 0.1, "a"] = np.nan
    X.loc[rs.rand(n) < 0.05, "city"] = None
    return X, y


def close(a, b):
    # XGBoost computes its contributions in float32: 1e-6 of the score's size
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("objective", ["squared_error", "extended_qwk", "multiclass"])
def test_values_plus_bias_are_the_raw_score(engine, objective, frame):
    X, y = frame
    m = qb.train(X, y + 1e6 if objective == "squared_error" and engine == "lightgbm" else y, engine, objective,
                 {"learning_rate": 0.3}, num_boost_round=25)
    e = qb.explain(m, X, max_rows=300)
    rows = X.iloc[np.sort(np.random.RandomState(0).choice(len(X), 300, replace=False))]
    close(e.score, m.predict_raw(rows))
    K = m.n_outputs
    assert e.values.shape == ((300, 5) if K == 1 else (300, 5, K)) and e.feature_names == list(X.columns)
    imp = e.importance()
    assert set(imp["feature"]) == set(X.columns)
    by_output = imp.groupby("output") if K > 1 else [(None, imp)]
    for _, part in by_output:
        assert part["shap_share"].sum() == pytest.approx(1.0) and part["gain_share"].sum() == pytest.approx(1.0)
        assert part.iloc[0]["feature"] in ("a", "b", "c")        # a real signal, not d or the id-like noise


def test_a_lone_model_has_no_ordinal_view(frame):
    X, y = frame
    e = qb.explain(qb.train(X, y, "lightgbm", num_boost_round=5), X, max_rows=50)
    with pytest.raises(ValueError, match="no cut points"):
        row_path(e, 0)


@pytest.fixture(scope="module")
def runs(frame, tmp_path_factory):
    """Two runs on the same folds (native extended QWK with string categories; XGBoost squared error)."""
    from hydra import compose, initialize_config_dir

    from omegaconf import OmegaConf

    from qwkboost.runs.experiment import run_experiment

    X, y = frame
    d = tmp_path_factory.mktemp("explain_runs")
    X.assign(grade=y.astype(int), Id=np.arange(len(y)) + 500).to_csv(d / "train.csv", index=False)
    out = []
    for engine, objective in (("native", "extended_qwk"), ("xgboost", "squared_error")):
        with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[2] / "conf"), version_base="1.3"):
            cfg = OmegaConf.to_container(compose("config", [
                "data=csv", f"data.path={d}/train.csv", "data.target=grade", "data.id=Id", f"engine={engine}",
                f"objective={objective}", "cv.n_splits=3", "engine.num_boost_round=60",
                "engine.early_stopping_rounds=10", "engine.params.learning_rate=0.3"]), resolve=True)
        run_experiment(cfg, None, output_dir=d / engine)
        out.append(d / engine)
    return X, out


def test_a_runs_fold_ensemble_adds_up_to_its_score_and_has_the_ordinal_view(runs):
    X, dirs = runs
    pipe = qb.load_run(dirs[0])
    e = qb.explain(pipe, X, max_rows=400)
    rows = X.iloc[np.sort(np.random.RandomState(0).choice(len(X), 400, replace=False))]
    close(e.score, pipe.predict_score(rows))
    np.testing.assert_array_equal(e.cuts, pipe.cuts)
    path = row_path(e, 3)
    assert path["score"].iloc[-1] == pytest.approx(e.score[3])
    assert path["class"].iloc[-1] == str(int(pipe.predict(rows.iloc[[3]])[0]))
    crossings = path[path["crosses"] != ""]
    assert (crossings["class"].to_numpy() != path["class"].shift().loc[crossings.index].to_numpy()).all()


def test_a_blend_is_its_members_values_times_their_weights(runs, tmp_path):
    from qwkboost.blending import blend, write_blend

    X, dirs = runs
    result = blend(dirs)
    write_blend(result, tmp_path / "b")
    fitted = qb.load_run(tmp_path / "b")
    e = qb.explain(fitted, X, max_rows=300)
    rows = X.iloc[np.sort(np.random.RandomState(0).choice(len(X), 300, replace=False))]
    close(e.score, fitted.predict_score(rows))
    parts = [qb.explain(qb.load_run(d), X, max_rows=300) for d in dirs]
    close(e.values, sum(w * p.values for w, p in zip(result.weights, parts)))
    ranked = blend(dirs, method="rank_mean")
    write_blend(ranked, tmp_path / "r")
    with pytest.raises(ValueError, match="a rank_mean blend is not a weighted sum of its members' scores"):
        qb.explain(qb.load_run(tmp_path / "r"), X)


def test_a_run_logs_its_explanations_and_a_planted_leak_comes_out_on_top(tmp_path, mlflow_store):
    """The run command on a generated file with a column that leaks the label: the leak tops the logged
    importance table, and every file of explanations/ is there."""
    import mlflow

    from conftest import run_in_process
    from qwkboost.data.synthetic import entity_frames

    train, _ = entity_frames(n_entities=600, rows_per_entity=2, n_test_entities=100, seed=3)
    rs = np.random.RandomState(1)
    train["leak"] = train["label"] + rs.normal(scale=0.2, size=len(train))
    train.to_csv(tmp_path / "train.csv", index=False)
    run_in_process(["data=csv", f"data.path={tmp_path}/train.csv", "data.target=label", "data.id=id",
                    "cv.group=entity", "engine=lightgbm", "cv.n_splits=3", "engine.num_boost_round=80",
                    "engine.early_stopping_rounds=10", f"tracking.uri={mlflow_store}",
                    "tracking.experiment_name=explain_leak", "tracking.log_pyfunc=false"], tmp_path / "run")
    client = mlflow.MlflowClient(mlflow_store)
    exp = client.get_experiment_by_name("explain_leak")
    row = {"run_id": client.search_runs([exp.experiment_id])[0].info.run_id}
    files = {a.path for a in client.list_artifacts(row["run_id"], "explanations")}
    assert files == {f"explanations/{f}" for f in ("importance.csv", "importance.png", "summary.png",
                                                    "shap_values.parquet", "rows.png", "dependence.png")}
    imp = pd.read_csv(client.download_artifacts(row["run_id"], "explanations/importance.csv", str(tmp_path)))
    assert imp["feature"].iloc[0] == "leak" and imp["shap_share"].iloc[0] > 0.5
    values = pd.read_parquet(client.download_artifacts(row["run_id"], "explanations/shap_values.parquet",
                                                       str(tmp_path)))
    n_train = len(pd.read_parquet(tmp_path / "run" / "oof.parquet"))
    assert len(values) == min(1000, n_train) and n_train > 900       # tracking.explain_rows: at most 1,000
    assert "id" in values.columns and values["id"].isin(train["id"]).all()
    assert client.get_run(row["run_id"]).data.metrics["explain_seconds"] > 0


def test_explain_command_on_a_run_and_a_blend(runs, tmp_path):
    """experiments/explain.py's work: a run's directory (its config found there, or the rows given), a blend's."""
    from qwkboost.blending import blend, write_blend
    from qwkboost.runs.explaining import explain_run

    X, dirs = runs
    with pytest.raises(ValueError, match=r"its config is not found .* give the rows to explain with data.path="):
        explain_run(str(dirs[0]), tmp_path / "none")
    train = dirs[0].parent / "train.csv"
    got = explain_run(str(dirs[0]), tmp_path / "run", data_path=str(train), rows=500, log_to_run=False)
    assert got["rows"] == 500 and {f.name for f in got["files"]} >= {"importance.csv", "rows.png"}
    values = pd.read_parquet(tmp_path / "run" / "shap_values.parquet")
    assert list(values.columns[:1]) == ["Id"] and values["Id"].min() >= 500        # the file's own ids
    write_blend(blend(dirs), tmp_path / "b")
    got = explain_run(str(tmp_path / "b"), tmp_path / "blend", data_path=str(train), rows=300, log_to_run=False)
    np.testing.assert_allclose(got["explanation"].score,
                               qb.load_run(tmp_path / "b").predict_score(got["explanation"].data), atol=1e-6)


def test_explain_names_the_users_file_when_it_lacks_a_column(runs, tmp_path):
    from qwkboost.runs.explaining import explain_run

    X, dirs = runs
    short = tmp_path / "short.csv"
    pd.read_csv(dirs[0].parent / "train.csv").drop(columns=[X.columns[0]]).to_csv(short, index=False)
    with pytest.raises(ValueError, match=rf"^data.path='{short}' lacks the feature column\(s\) \['{X.columns[0]}'\]"):
        explain_run(str(dirs[0]), tmp_path / "out", data_path=str(short), rows=50, log_to_run=False)


@pytest.mark.parametrize("objective", ["squared_error", "multiclass"])
def test_features_called_score_bias_and_row_keep_their_shap_values(objective):
    """A feature named score, bias or row (no id given) kept one column where two belong: the frame's own
    columns give way (score_qwkboost, ...), and the values still add up."""
    rs = np.random.RandomState(0)
    X = pd.DataFrame({"score": rs.rand(300), "bias": rs.rand(300), "row": rs.rand(300)})
    y = np.round(X["score"] * 2 + X["bias"])
    e = qb.explain(qb.train(X, y, "lightgbm", objective, num_boost_round=5), X, max_rows=None)
    frame = e.frame()
    if objective == "squared_error":
        assert list(frame.columns) == ["row_qwkboost", "score", "bias", "row", "bias_qwkboost", "score_qwkboost"]
        np.testing.assert_allclose(frame[["score", "bias", "row", "bias_qwkboost"]].sum(axis=1),
                                   frame["score_qwkboost"])
        np.testing.assert_array_equal(frame["score"], e.values[:, 0])
        with pytest.raises(ValueError, match="the id column 'bias' is also a feature's column"):
            e.frame(id_name="bias")
    else:
        assert len(frame.columns) == len(set(frame.columns)) == 1 + 5 * e.n_outputs
        assert {"score@0.0", "bias_qwkboost@0.0", "score_qwkboost@0.0"} <= set(frame.columns)
