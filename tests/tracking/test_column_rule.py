"""The column rule, property-based: whatever the user's columns are called (qwkboost's own names, unicode,
punctuation, numbers as text), no file a run, a blend, an explanation or experiments/predict.py writes drops or
overwrites one of them, and each holds qwkboost's columns beside them.

Hypothesis draws the names of the id, label, entity, weight and three feature columns of one small file; each
example then runs it for real: two LightGBM runs (tracking off), their blend, the run's and the blend's
explanations (tables only: the pictures hold no columns) and predictions of new rows, and checks every table
written. The data are the same in every example; only the names change."""

import importlib.util
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from qwkboost.blending import blend, write_blend
from qwkboost.runs.experiment import run_experiment
from qwkboost.runs.explaining import explain_run
from qwkboost.tracking.outputs import read_predictions

ROOT = Path(__file__).resolve().parents[2]
#: Names qwkboost gives columns of its own (in any file), and ones it gives way with.
RESERVED = ["score", "class", "fold", "fold_1", "weight", "nested_class", "member_0", "member_1", "bias", "row",
            "label", "group", "score_qwkboost", "bias_qwkboost", "row_qwkboost", "class_qwkboost", "feature",
            "output", "mean_abs_shap", "shap_share", "gain_share", "id", "Id"]
ROLES = ("id", "target", "group", "weight", "f0", "f1", "f2")
#: Any printable text: letters of any script, digits, punctuation, symbols, spaces (not control characters,
#: which a CSV header cannot hold as such, nor lone surrogates, which are not text)
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=6)
NAME = st.one_of(st.sampled_from(RESERVED), TEXT)
N = 160


def _spec():
    spec = importlib.util.spec_from_file_location("predict_cmd_rule", ROOT / "experiments" / "predict.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PREDICT = _spec()


def _frame(names: dict) -> pd.DataFrame:
    rs = np.random.RandomState(0)
    X = rs.randn(N, 3)
    y = np.digitize(X[:, 0] + 0.6 * X[:, 1] + 0.3 * rs.randn(N), [-0.6, 0.6]) + 1       # labels 1..3
    return pd.DataFrame({names["f0"]: X[:, 0], names["f1"]: X[:, 1], names["f2"]: X[:, 2],
                         names["id"]: np.arange(N) * 7 + 1000,
                         names["group"]: [f"e{g}" for g in rs.randint(0, 40, N)],
                         names["weight"]: rs.uniform(0.5, 2.0, N).round(3), names["target"]: y})


def _cfg(path: Path, names: dict, leaves: int) -> dict:
    return {"data": {"name": "csv", "path": str(path), "target": names["target"], "id": names["id"],
                     "weight": names["weight"], "test_size": 0.25, "seed": 0},
            "engine": {"name": "lightgbm", "num_boost_round": 8, "early_stopping_rounds": None,
                       "params": {"learning_rate": 0.3, "num_leaves": leaves, "min_data_in_leaf": 5, "verbose": -1,
                                  "num_threads": 1}},
            "objective": {"name": "squared_error", "params": {}},
            "cv": {"n_splits": 2, "stratified": True, "shuffle": True, "group": names["group"]},
            "thresholds": {"method": "exact"}, "tracking": {"explain": False}, "seed": 0}


def _same(got, want, what):
    assert np.array_equal(np.asarray(got), np.asarray(want)), what


def _check_predictions(path: Path, by_id: pd.DataFrame, names: dict, parts: tuple):
    """A prediction file: the record names the user's parts by their names, the table holds exactly the record's
    columns, and each user column holds the user's values for its rows."""
    frame, oc = read_predictions(path)
    assert oc is not None and list(frame.columns) == oc.names and len(set(frame.columns)) == len(frame.columns), path
    user = {"id": names["id"], "label": names["target"], "group": names["group"], "weight": names["weight"]}
    assert {k: v for k, v in oc.user.items() if k in parts} == {k: user[k] for k in parts}, (path, oc.user)
    rows = by_id.loc[frame[names["id"]]]
    for part in parts:
        if part != "id":
            _same(frame[user[part]], rows[user[part]], f"{path.name}: {part} column {user[part]!r}")
    assert not set(oc.own.values()) & set(user.values()), (path, oc.own)      # alike in every file of the run
    return frame, oc


def _check_submission(path: Path, by_id: pd.DataFrame, names: dict):
    sub = pd.read_csv(path, dtype={names["id"]: np.int64})
    assert list(sub.columns) == [names["id"], names["target"]], path
    assert set(by_id.loc[sub[names["id"]]].index) == set(sub[names["id"]])
    assert set(sub[names["target"]]) <= {1, 2, 3}


def _check_explanation(out: Path, names: dict, ids):
    """shap_values.parquet: the id and every feature under the user's names, and qwkboost's bias and score
    beside them, adding up; importance.csv: one row per feature, by the user's name."""
    values = pd.read_parquet(out / "shap_values.parquet")
    features = [names[f] for f in ("f0", "f1", "f2")]
    cols = list(values.columns)
    assert len(cols) == len(set(cols)) == 6 and cols[:4] == [names["id"], *features], cols
    bias, score = cols[4:]
    assert bias.startswith("bias") and score.startswith("score") and not {bias, score} & set(names.values())
    _same(values[names["id"]], ids, "shap ids")
    np.testing.assert_allclose(values[features].sum(axis=1) + values[bias], values[score], atol=1e-9)
    importance = pd.read_csv(out / "importance.csv", keep_default_na=False, dtype={"feature": str})
    assert sorted(importance["feature"]) == sorted(features)


@pytest.fixture(scope="module")
def workdir():
    d = Path(tempfile.mkdtemp(prefix="qwkboost-column-rule-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@example(names=["row", "score", "fold", "class", "bias", "score_qwkboost", "member_0"])
@example(names=["Id", "weight", "group", "label", "feature", "nested_class", "row_qwkboost"])
@given(names=st.lists(NAME, min_size=len(ROLES), max_size=len(ROLES), unique=True))
def test_no_output_drops_or_overwrites_a_users_column(workdir, names):
    names = dict(zip(ROLES, names))
    d = Path(tempfile.mkdtemp(dir=workdir))
    df = _frame(names)
    df.to_csv(d / "train.csv", index=False)
    by_id = df.set_index(names["id"])
    runs = []
    for leaves in (7, 3):
        runs.append(d / f"run{leaves}")
        run_experiment(_cfg(d / "train.csv", names, leaves), None, output_dir=runs[-1])
    result = blend(runs)
    write_blend(result, d / "blend")
    for out in (*runs, d / "blend"):
        oof, oc = _check_predictions(out / "oof.parquet", by_id, names, ("id", "label", "group", "weight"))
        assert set(oof[oc["class"]]) <= {1, 2, 3}
        _check_predictions(out / "predictions.parquet", by_id, names, ("id", "label"))
        _check_submission(out / "submission.csv", by_id, names)
    # explanations of a run and of the blend, on rows of the user's file named by its id
    for source in (runs[0], d / "blend"):
        got = explain_run(str(source), d / f"explain-{source.name}", data_path=str(d / "train.csv"), rows=40,
                          log_to_run=False, pictures=False)
        _check_explanation(d / f"explain-{source.name}", names, got["explanation"].data[names["id"]])
    # new rows through experiments/predict.py
    new = df.drop(columns=[names["target"]]).iloc[:30]
    new.to_csv(d / "new.csv", index=False)
    PREDICT.predict_file(str(d / "blend"), str(d / "new.csv"), d / "predicted")
    pred, pc = read_predictions(d / "predicted" / "predictions.parquet")
    assert pc.user == {"id": names["id"]} and list(pred.columns) == pc.names
    _same(pred[names["id"]], new[names["id"]], "predicted ids")
    assert not set(pc.own.values()) & {names[k] for k in ("id", "target", "group", "weight")}
    _check_submission(d / "predicted" / "submission.csv", by_id, names)
    shutil.rmtree(d)
