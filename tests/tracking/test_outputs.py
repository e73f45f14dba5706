"""The column rule of the prediction files (qwkboost.tracking.outputs): whatever the user's id, label, entity and
weight columns are called, every output file keeps them and holds qwkboost's own columns beside them; every
reader (the blend, its other-tool input, experiments/predict.py, load_run) finds each part; files of qwkboost
0.1 still load, or are refused saying how to convert them."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from qwkboost.blending import BlendInputError, blend, read_members, write_blend
from qwkboost.runs.experiment import run_experiment
from qwkboost.tracking.outputs import OutputColumns, read_predictions

ROOT = Path(__file__).resolve().parents[2]
#: Every name qwkboost gives a column of its own, and one it gives way with.
RESERVED = ["score", "class", "fold", "fold_1", "weight", "nested_class", "member_0", "member_1", "score_qwkboost"]
ROLES = ("target", "id", "group", "weight")


def combos():
    """Each reserved name in each of the four roles at least once (a Latin square over the names)."""
    return [{role: RESERVED[(j + r) % len(RESERVED)] for r, role in enumerate(ROLES)} for j in range(len(RESERVED))]


def make_file(path: Path, names: dict, n: int = 360, seed: int = 0, words=None) -> pd.DataFrame:
    rs = np.random.RandomState(seed)
    X = rs.randn(n, 3)
    s = X[:, 0] + 0.6 * X[:, 1] + 0.4 * rs.randn(n)
    y = np.digitize(s, np.quantile(s, [0.25, 0.5, 0.75])) + 1        # labels 1..4
    df = pd.DataFrame({"f0": X[:, 0], "f1": X[:, 1], "f2": X[:, 2]})
    df[names["id"]] = np.arange(n) * 7 + 1000                          # ids unlike row numbers, scores or folds
    if names.get("group"):
        df[names["group"]] = [f"e{g}" for g in rs.randint(0, 60, n)]
    if names.get("weight"):
        df[names["weight"]] = rs.uniform(0.5, 2.0, n).round(3)
    df[names["target"]] = np.asarray(words, dtype=object)[y - 1] if words is not None else y
    df.to_csv(path, index=False)
    return df


def config(data: dict, engine: str = "lightgbm", objective: str = "squared_error", extra=()) -> dict:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", ["data=csv", f"engine={engine}", f"objective={objective}", "cv.n_splits=3",
                                 "engine.num_boost_round=30", "engine.early_stopping_rounds=5",
                                 "engine.params.learning_rate=0.3", *extra])
    out = OmegaConf.to_container(cfg, resolve=True)
    out["data"].update(data)
    return out


def run(tmp: Path, data: dict, engine: str, objective: str = "squared_error", group=None, extra=()) -> Path:
    cfg = config(data, engine, objective, [*(["cv.repeats=2"] if group else []), *extra])
    cfg["cv"]["group"] = group
    out = tmp / f"{engine}-{objective}"
    run_experiment(cfg, None, output_dir=out)
    return out


def test_the_rule_gives_way_to_the_users_columns():
    oc = OutputColumns.resolve({"id": "class", "label": "score", "group": "fold", "weight": "score_qwkboost"},
                               ["score", "class", "fold", "fold_1"])
    assert oc.user == {"id": "class", "label": "score", "group": "fold", "weight": "score_qwkboost"}
    assert oc.own == {"score": "score_qwkboost_qwkboost", "class": "class_qwkboost", "fold": "fold_qwkboost",
                      "fold_1": "fold_1"}
    assert len(set(oc.names)) == len(oc.names) == 8
    # parts the user did not name take defaults kept clear of the user's names
    oc = OutputColumns.resolve({"id": None, "label": "row"}, ["score"])
    assert oc["id"] == "row_qwkboost" and oc["label"] == "row" and oc["score"] == "score"


@pytest.mark.parametrize("names", combos(), ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_every_reserved_name_in_every_role_keeps_the_users_column(tmp_path, names):
    """Two runs on a file whose target, id, entity and weight columns carry qwkboost's own names, then their
    blend: every output keeps the user's values, and qwkboost's columns hold what they should."""
    df = make_file(tmp_path / "train.csv", names)
    data = {"path": str(tmp_path / "train.csv"), "target": names["target"], "id": names["id"],
            "weight": names["weight"], "test_size": 0.25}
    dirs = [run(tmp_path, data, engine, group=names["group"]) for engine in ("lightgbm", "xgboost")]
    by_id = df.set_index(names["id"])
    for d in dirs:
        oof, oc = read_predictions(d / "oof.parquet")
        assert oc is not None and list(oof.columns) == oc.names
        assert oc.user == {"id": names["id"], "label": names["target"], "group": names["group"],
                           "weight": names["weight"]}
        rows = by_id.loc[oof[names["id"]]]
        for role in ("target", "group", "weight"):      # the user's columns hold the user's values, unchanged
            assert (oof[names[role]].to_numpy() == rows[names[role]].to_numpy()).all(), role
        assert oof[oc["score"]].between(0, 5).all() and not np.array_equal(oof[oc["score"]], oof[names["target"]])
        assert set(oof[oc["fold"]]) == {0, 1, 2} and set(oof[oc["fold_1"]]) == {0, 1, 2}
        assert (oof.groupby(names["group"])[oc["fold"]].nunique() == 1).all()     # grouped by the user's entity
        pred, pc = read_predictions(d / "predictions.parquet")
        assert pc["id"] == names["id"] and list(pred.columns) == pc.names
        rows = by_id.loc[pred[names["id"]]]
        assert (pred[names["target"]].to_numpy() == rows[names["target"]].to_numpy()).all()   # test labels kept
        assert set(pred[pc["class"]]) <= {1, 2, 3, 4}
        sub = pd.read_csv(d / "submission.csv")
        assert list(sub.columns) == [names["id"], names["target"]]
        assert (sub[names["target"]].to_numpy() == pred[pc["class"]].to_numpy()).all()
    result = blend(dirs)
    assert result.members[0].target == names["target"] and result.members[1].weight is not None
    files = write_blend(result, tmp_path / "blend")
    oof, oc = read_predictions(files[0])
    rows = by_id.loc[oof[names["id"]]]
    assert (oof[names["target"]].to_numpy() == rows[names["target"]].to_numpy()).all()
    assert (oof[names["weight"]].to_numpy() == rows[names["weight"]].to_numpy()).all()
    np.testing.assert_allclose(oof[oc.member_columns].to_numpy() @ result.weights, oof[oc["score"]], rtol=1e-12)
    pred, pc = read_predictions(files[1])
    assert (pred[names["target"]].to_numpy() == by_id.loc[pred[names["id"]], names["target"]].to_numpy()).all()
    sub = pd.read_csv(files[2])
    assert list(sub.columns) == [names["id"], names["target"]] and set(sub[names["target"]]) <= {1, 2, 3, 4}
    # the blend's own files blend again (a blend is a member like any other)
    again = blend([tmp_path / "blend", dirs[0]])
    assert again.metrics["oof_qwk"] > 0.3


def test_predict_command_keeps_an_id_called_score(tmp_path):
    import importlib.util

    names = {"target": "class", "id": "score"}
    make_file(tmp_path / "train.csv", names)
    d = run(tmp_path, {"path": str(tmp_path / "train.csv"), "target": "class", "id": "score", "test_size": 0.25},
            "lightgbm")
    new = pd.read_csv(tmp_path / "train.csv").drop(columns="class").iloc[:50]
    spec = importlib.util.spec_from_file_location("predict_cmd", ROOT / "experiments" / "predict.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sub = pd.read_csv(mod.predict_file(str(d), str(_csv(new, tmp_path / "new.csv")), tmp_path / "p"))
    assert list(sub.columns) == ["score", "class"] and (sub["score"] == new["score"]).all()
    pred, pc = read_predictions(tmp_path / "p" / "predictions.parquet")
    # the run's label 'class' keeps its name in the predictions of new rows too
    assert pc.own == {"class": "class_qwkboost", "score": "score_qwkboost"} and (pred["score"] == new["score"]).all()
    assert (pred["class_qwkboost"] == sub["class"]).all()


def _csv(frame, path):
    frame.to_csv(path, index=False)
    return path


def _as_version_01(d: Path, target: str, id_name: str) -> None:
    """Rewrite a run's prediction files as qwkboost 0.1 wrote them: plain names, later ones over earlier, no
    record."""
    for name in ("oof.parquet", "predictions.parquet"):
        frame, oc = read_predictions(d / name)
        cols = {}
        for role, col in [*oc.user.items(), *oc.own.items()]:
            plain = {"label": target, "id": id_name}.get(role, "weight" if role == "weight" else role)
            cols[plain] = frame[col].to_numpy()
        pd.DataFrame(cols).to_parquet(d / name, index=False)      # pandas' own writer: no record
        assert pq.read_schema(d / name).metadata.get(b"qwkboost") is None


def test_files_of_version_01_load_or_are_refused_saying_how(tmp_path):
    for target in ("rating", "score"):
        make_file(tmp_path / f"{target}.csv", {"target": target, "id": "Id"})
        data = {"path": str(tmp_path / f"{target}.csv"), "target": target, "id": "Id", "test_size": 0.25}
        dirs = [run(tmp_path / target, data, e) for e in ("lightgbm", "xgboost")]
        expected = blend(dirs).metrics
        for d in dirs:
            _as_version_01(d, target, "Id")
        if target == "rating":          # nothing of the user's was written over: it loads as before
            assert blend(dirs).metrics == expected
        else:
            with pytest.raises(BlendInputError, match=r"written by qwkboost 0.1, whose own 'score' column wrote over "
                                                      r"your column 'score' .* Run it again with this qwkboost"):
                blend(dirs)


def test_other_tools_files_follow_the_same_rule(tmp_path):
    """Another tool's oof.csv/test.csv whose label is called 'score': its prediction is score_qwkboost."""
    make_file(tmp_path / "train.csv", {"target": "score", "id": "Id"})
    d = run(tmp_path, {"path": str(tmp_path / "train.csv"), "target": "score", "id": "Id", "test_size": 0.25},
            "lightgbm")
    oof, oc = read_predictions(d / "oof.parquet")
    pred, pc = read_predictions(d / "predictions.parquet")
    other = tmp_path / "nn"
    other.mkdir()
    oof.rename(columns={oc["score"]: "score_qwkboost", oc["fold"]: "fold"}).assign(
        score_qwkboost=lambda f: f["score_qwkboost"] + 0.05)[["Id", "score", "score_qwkboost", "fold"]].to_csv(
        other / "oof.csv", index=False)
    pred[["Id", pc["score"]]].to_csv(other / "test.csv", index=False)
    members = read_members([d, other], id="Id", target="score")
    assert members[1].source == str(other)
    np.testing.assert_allclose(members[1].oof, members[0].oof + 0.05)
    np.testing.assert_array_equal(members[1].y, members[0].y)
    assert blend(members).metrics["oof_qwk"] > 0.3


WORDS = ["mild", "moderate", "severe", "critical"]


def test_labels_as_words_with_data_classes_come_back_as_words(tmp_path):
    df = make_file(tmp_path / "train.csv", {"target": "severity", "id": "Id"}, words=WORDS)
    data = {"path": str(tmp_path / "train.csv"), "target": "severity", "id": "Id", "test_size": 0.25,
            "classes": WORDS}
    dirs = [run(tmp_path, data, e, o) for e, o in (("lightgbm", "squared_error"), ("xgboost", "multiclass"))]
    for d in dirs:
        oof, oc = read_predictions(d / "oof.parquet")
        assert oc.labels == WORDS
        assert (oof["severity"].to_numpy() == df.set_index("Id").loc[oof["Id"], "severity"].to_numpy()).all()
        assert set(oof["class"]) <= set(WORDS) and oof["score"].between(-1, 4).all()
        sub = pd.read_csv(d / "submission.csv")
        assert set(sub["severity"]) <= set(WORDS) and len(set(sub["severity"])) >= 3
        result = json.loads((d / "result.json").read_text())
        assert result["qwk_thresholds"] > 0.5        # scored on the order given, not the alphabet's
        from qwkboost import load_run

        pipe = load_run(d)
        assert set(pipe.predict(df.drop(columns="severity").iloc[:40])) <= set(WORDS)
    result = blend(dirs)
    files = write_blend(result, tmp_path / "blend")
    assert set(pd.read_csv(files[2])["severity"]) <= set(WORDS)
    from qwkboost import load_run

    assert set(load_run(tmp_path / "blend").predict(df.drop(columns="severity").iloc[:40])) <= set(WORDS)
    # the alphabet's order (critical < mild < moderate < severe) is another scale, and scores worse
    wrong = run(tmp_path / "alpha", {**data, "classes": sorted(WORDS)}, "lightgbm")
    assert json.loads((wrong / "result.json").read_text())["qwk_thresholds"] < result.metrics["test_qwk"] - 0.1


def test_an_ordered_categorical_parquet_target_brings_its_order(tmp_path):
    df = make_file(tmp_path / "t.csv", {"target": "grade", "id": "Id"}, words=WORDS)
    df["grade"] = pd.Categorical(df["grade"], categories=WORDS, ordered=True)
    df.to_parquet(tmp_path / "t.parquet", index=False)
    from qwkboost.data.files import from_file

    ds = from_file(str(tmp_path / "t.parquet"), "grade", id="Id")
    assert ds.labels.values == tuple(WORDS) and ds.classes.tolist() == [0, 1, 2, 3]
    assert (ds.decode(ds.y_train) == df.set_index("Id").loc[ds.ids_train, "grade"].astype(str).to_numpy()).all()


def test_words_without_an_order_and_unknown_labels_are_refused_naming_them(tmp_path):
    from qwkboost.data.files import from_file

    df = make_file(tmp_path / "t.csv", {"target": "grade", "id": "Id"}, words=WORDS)
    with pytest.raises(ValueError, match=r"data.target='grade' holds labels that are words \('critical', 'mild', "
                                         r"'moderate', 'severe'\); give their order, lowest first, with data.classes"):
        from_file(str(tmp_path / "t.csv"), "grade")
    df.loc[17, "grade"] = "fatal"
    df.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match=r"data.target='grade' in data.path: data row 17 is 'fatal', which is not one "
                                         r"of the classes \['mild', 'moderate', 'severe', 'critical'\]"):
        from_file(str(tmp_path / "t.csv"), "grade", classes=WORDS, test_size=0.2, seed=0)
    with pytest.raises(ValueError, match=r"data.classes: the classes repeat 'mild'"):
        from_file(str(tmp_path / "t.csv"), "grade", classes=["mild", "mild", "severe"])


def test_the_entity_column_may_also_be_dropped(tmp_path):
    from qwkboost.data.files import from_file

    make_file(tmp_path / "t.csv", {"target": "y", "id": "Id", "group": "entity"})
    ds = from_file(str(tmp_path / "t.csv"), "y", id="Id", drop=["entity"], group="entity")
    assert "entity" not in ds.feature_names and ds.group_name == "entity" and len(set(ds.groups_train)) > 10
    with pytest.raises(ValueError, match=r"cv.group='y' is also data.target"):
        from_file(str(tmp_path / "t.csv"), "y", group="y")


def test_the_classifier_takes_the_order_of_words(tmp_path):
    from qwkboost import QWKClassifier

    df = make_file(tmp_path / "t.csv", {"target": "grade", "id": "Id"}, words=WORDS)
    X, y = df[["f0", "f1", "f2"]], df["grade"]
    kw = dict(engine="lightgbm", num_boost_round=40, early_stopping_rounds=5, n_splits=3)
    given = QWKClassifier(classes=WORDS, **kw).fit(X, y)
    assert given.classes_.tolist() == WORDS and set(given.predict(X)) <= set(WORDS)
    ordered = QWKClassifier(**kw).fit(X, pd.Series(pd.Categorical(y, categories=WORDS, ordered=True)))
    assert ordered.classes_.tolist() == WORDS
    np.testing.assert_allclose(ordered.predict_score(X), given.predict_score(X))
    with pytest.warns(UserWarning, match="ranked here in sorted order"):
        alpha = QWKClassifier(**kw).fit(X, y)
    assert alpha.classes_.tolist() == sorted(WORDS)
    assert given.score(X, y) > alpha.score(X, y) + 0.1
    with pytest.raises(ValueError, match=r"data row 0 is 'fatal', which is not one of the classes"):
        QWKClassifier(classes=WORDS, **kw).fit(X, y.where(y.index != 0, "fatal"))


def test_a_copied_run_reads_the_same(tmp_path):
    """The record travels with the file: a run copied elsewhere reads the same parts."""
    make_file(tmp_path / "train.csv", {"target": "class", "id": "fold"})
    d = run(tmp_path, {"path": str(tmp_path / "train.csv"), "target": "class", "id": "fold", "test_size": 0.25},
            "lightgbm")
    shutil.copytree(d, tmp_path / "copy")
    a, b = read_members([d])[0], read_members([tmp_path / "copy"])[0]
    np.testing.assert_array_equal(a.y, b.y)
    assert a.id_name == "fold" and a.target == "class" and a.folds is not None


def test_an_mlflow_run_on_words_logs_them_and_serves_them(tmp_path, mlflow_store):
    """The logged run: its plots name the classes, its prediction files carry their record through MLflow, and
    its pyfunc model answers with words."""
    import mlflow

    from qwkboost import tracking

    df = make_file(tmp_path / "train.csv", {"target": "severity", "id": "score"}, words=WORDS)
    cfg = config({"path": str(tmp_path / "train.csv"), "target": "severity", "id": "score", "test_size": 0.25,
                  "classes": WORDS}, "lightgbm", "squared_error")
    experiment_id = tracking.setup(mlflow_store, "outputs_words")
    row = run_experiment(cfg, experiment_id)
    client = mlflow.MlflowClient(mlflow_store)
    arts = {a.path for a in client.list_artifacts(row["run_id"], "plots")}
    assert {"plots/oof_histograms.png", "plots/confusion_matrix.png"} <= arts
    assert json.loads(Path(client.download_artifacts(row["run_id"], "thresholds.json", str(tmp_path))).read_text())[
        "labels"] == WORDS
    from model_files import model_uri

    model = mlflow.pyfunc.load_model(model_uri(client, row["run_id"]))
    got = model.predict(df.drop(columns="severity").iloc[:30])
    assert set(got["class"]) <= set(WORDS) and len(got) == 30
    members = read_members([row["run_id"]], tracking_uri=mlflow_store)
    assert members[0].labels == WORDS and members[0].id_name == "score"


def test_a_tracked_run_with_a_folder_writes_its_outputs_once_and_logs_those_files(tmp_path, mlflow_store,
                                                                                  monkeypatch):
    """A run that writes its outputs into its folder logs those very files to MLflow (predictions and pipeline),
    rather than writing them a second time for the upload (a candidate's pipeline can be hundreds of MB)."""
    import hashlib

    import mlflow

    from qwkboost import tracking
    from qwkboost.runs import experiment

    make_file(tmp_path / "train.csv", {"target": "grade", "id": "Id"})
    cfg = config({"path": str(tmp_path / "train.csv"), "target": "grade", "id": "Id", "test_size": 0.25},
                 extra=["tracking.explain=false", "tracking.log_pyfunc=false"])
    calls = []
    real = experiment.write_outputs
    monkeypatch.setattr(experiment, "write_outputs", lambda out, *a: calls.append(out) or real(out, *a))
    out = tmp_path / "run"
    row = run_experiment(cfg, tracking.setup(mlflow_store, "written_once"), output_dir=out)
    assert calls == [out]
    client = mlflow.MlflowClient(mlflow_store)
    got = Path(client.download_artifacts(row["run_id"], "", str(tmp_path / "logged")))

    def digest(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    for f in ("oof.parquet", "predictions.parquet", "submission.csv"):
        assert digest(got / "predictions" / f) == digest(out / f)
    files = sorted(p.relative_to(out / "pipeline") for p in (out / "pipeline").rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(got / "pipeline") for p in (got / "pipeline").rglob("*")
                                     if p.is_file())
    assert all(digest(got / "pipeline" / f) == digest(out / "pipeline" / f) for f in files)
