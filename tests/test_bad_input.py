"""Bad input thrown at the library as a careless new user would: every case gets a ValueError that names the
argument, before any training. Each row was a raw library error or a silent wrong answer before."""

import json

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from qwkboost.cv.crossval import cross_validate
from qwkboost.data.sources import chisq, from_file, quartiles
from qwkboost.evaluation.metrics import extended_qwk, qwk
from qwkboost.native.sklearn import NativeGBDTRegressor
from qwkboost.objectives import SquaredError
from qwkboost.evaluation.thresholds import round_cuts

RS = np.random.RandomState(0)
X = RS.rand(300, 3)
Y = (np.arange(300) % 4).astype(float)
XDF = pd.DataFrame(X, columns=list("abc"))


def T(**kw):
    args = {"X": X, "y": Y, "num_boost_round": 5}
    args.update(kw)
    return qb.train(**args)


class Short(SquaredError):
    def grad_hess(self, y, score):
        g, h = super().grad_hess(y, score)
        return g[:-1], h[:-1]


class NaNs(SquaredError):
    def grad_hess(self, y, score):
        g, h = super().grad_hess(y, score)
        return g * np.nan, h


TRAIN_CASES = [
    (dict(engine=["xgboost"]), "unknown engine \\['xgboost'\\]"),
    (dict(objective=["squared_error"]), "objective must be a registered name or an Objective instance; got list"),
    (dict(objective_params=["hessian", "constant"]), "objective_params must be a dict"),
    (dict(params="max_depth=3"), "params must be a dict"),
    (dict(y=Y * 1e300), "y spans .* rescale them"),
    (dict(y=(Y + 2 ** 60).astype(np.int64)), "y holds integers beyond 2\\*\\*53"),
    (dict(engine="lightgbm", params={"verbose": True}), "lightgbm rejected the parameters: Parameter verbose"),
    (dict(engine="native", params={"monotone_constraints": "(1,a,0)"}), "monotone_constraints must list -1, 0 or"),
    (dict(engine="native", seed=-1), "seed must be an integer in \\[0, 2147483647\\]"),
    (dict(seed=2 ** 70), "seed must be an integer in \\[0, 2147483647\\]"),
    (dict(callbacks=lambda r, ev: None), "callbacks must be a list of functions"),
    (dict(callbacks=[1]), "callbacks\\[0\\] is not callable"),
    (dict(engine="lightgbm", callbacks=[lambda r: None]), "callbacks\\[0\\] must accept two arguments"),
    (dict(X=pd.DataFrame(X, columns=["a", "a", "b"])), "X has duplicate column names \\['a'\\]"),
    (dict(engine="xgboost", params={"monotone_constraints": "(1,1)"}),
     "monotone_constraints has 2 entries but X has 3 features"),
    (dict(engine="lightgbm", params={"categorical_feature": [99]}), "categorical_feature must list feature indices"),
    (dict(engine="native", params={"n_jobs": 0}), "n_jobs must be a positive integer, or -1 or None"),
    (dict(engine="native", params={"enable_bundle": "false"}), "enable_bundle must be true or false; got 'false'"),
    (dict(objective="extended_qwk", eval_set=(X, Y + 0.37)), "needs whole-numbered ordinal labels; eval_set y"),
    (dict(objective="extended_qwk", objective_params={"a": 1e308}), "a \\(the target label mean\\) must lie within"),
]
TRAIN_CASES += [(dict(engine=e, objective=Short()), r"grad_hess returned gradients of shape \(299,\)")
                for e in ("xgboost", "lightgbm", "native")]
TRAIN_CASES += [(dict(engine=e, objective=NaNs()), "returned non-finite gradients") for e in ("xgboost", "lightgbm")]


@pytest.mark.parametrize("kw, match", TRAIN_CASES, ids=[str(i) for i in range(len(TRAIN_CASES))])
def test_train_refuses(kw, match):
    with pytest.raises(ValueError, match=match):
        T(**kw)


@pytest.fixture(scope="module")
def model():
    return qb.train(X, Y, "xgboost", num_boost_round=3)


@pytest.mark.parametrize("n", [float("nan"), "3", 2.7, True])
def test_predict_wants_an_integer_round(model, n):
    with pytest.raises(ValueError, match="num_iteration must be an integer in \\[0, 3\\]"):
        model.predict(X, num_iteration=n)


@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "native"])
@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(num_rounds=50, best_iteration=50), "num_rounds is 50, but the booster holds 3 rounds"),
    (lambda d: d.update(n_features=2, feature_names=None), "n_features is 2, but the booster was trained on 3"),
    (lambda d: d["objective"].update(state={}), "the objective's state lacks"),
])
def test_model_file_must_match_its_booster(engine, edit, match, tmp_path):
    m = qb.train(X, Y, engine, "extended_qwk", num_boost_round=3)
    payload = json.loads(m.save(tmp_path / "m.json").read_text())
    edit(payload)
    (tmp_path / "e.json").write_text(json.dumps(payload))
    with pytest.raises(ValueError, match=match):
        qb.load_model(tmp_path / "e.json")


def test_load_model_names_a_bad_path(tmp_path):
    with pytest.raises(ValueError, match="is not a file"):
        qb.load_model(tmp_path)
    with pytest.raises(ValueError, match="path must be a file path"):
        qb.load_model(None)


@pytest.mark.parametrize("call, match", [
    (lambda: qwk([0, 1, 2], [0, 1, 1], n_classes=float("nan")), "n_classes must be an integer >= 2"),
    (lambda: qwk([0, 1, 2], [0, 1, 1], n_classes=float("inf")), "n_classes must be an integer >= 2"),
    (lambda: qwk([0, 1, 2], [0, 1, 1], n_classes=[4]), "n_classes must be an integer >= 2"),
    (lambda: qwk([0, 1e20, 0], [0, 1e20, 1e20]), "beyond 2\\*\\*53"),
    (lambda: extended_qwk([0, 1, 2], [0.0, 1.0, 1.0], a="1"), "a must be a finite number"),
    (lambda: extended_qwk([0, 1, 2], [0.0, 1.0, 1.0], a=float("nan"), b=1.0), "a must be a finite number"),
    (lambda: extended_qwk([0, 1, 2], [0.0, 1.0, 1.0], a=1.0, b=-5.0), "b \\(a variance\\) must be a finite number > 0"),
    (lambda: extended_qwk([1, 1, 1], [1.0, 1.0, 1.0], a=1.0, b=0.0), "b \\(a variance\\) must be a finite number > 0"),
    (lambda: round_cuts(10 ** 12), "n_classes must be an integer in \\[2, 1,000,000\\]"),
])
def test_metrics_and_thresholds_refuse(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def cv(**kw):
    args = dict(X=X, y=Y, engine="xgboost", objective="squared_error", num_boost_round=5, n_splits=3)
    args.update(kw)
    return cross_validate(args.pop("X"), args.pop("y"), args.pop("X_test", None), **args)


@pytest.mark.parametrize("kw, match", [
    (dict(X=X.astype(str).astype(object) + "x"), "X must be numeric"),
    (dict(X=XDF, X_test=XDF.iloc[:, :2]), "X_test lacks the feature column\\(s\\) \\['c'\\]"),
    (dict(y=Y[:-5]), "X and y have different lengths: 300 != 295"),
    (dict(y=None), "y is None"),
    (dict(y=np.r_[np.nan, Y[1:]]), "y contains 1 NaN or inf value"),
    (dict(seed="1"), "seed must be an integer"),
    (dict(seed=-1), "seed must be an integer in \\[0, "),
    (dict(X_test=X[:, :2]), "X_test has 2 features but X has 3"),
    (dict(X_test=X[:, 0]), "X_test must be 2-dimensional"),
    (dict(stratified="false"), "cv.stratified must be true or false; got 'false'"),
])
def test_cross_validate_checks_before_the_first_fold(kw, match, monkeypatch):
    import qwkboost.cv.crossval as cvmod

    trained = []
    monkeypatch.setattr(cvmod, "train_scoring", lambda *a, **k: trained.append(1))
    with pytest.raises(ValueError, match=match):
        cv(**kw)
    assert not trained


def _csv(tmp_path, text, name="d.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("text, kw, match", [
    ("f,y\n1,0\n2,\n3,1\n4,2\n5,1\n6,0\n", {}, "missing or infinite in 1 row\\(s\\) of data.path \\(first: data row 1\\)"),
    ("f,y\n" + "".join(f"{i},{i % 3}\n" for i in range(30)), {"test_size": "0.2"}, "data.test_size must be a finite"),
    ("f,y\n" + "".join(f"{i},{i % 3}\n" for i in range(30)), {"seed": "1"}, "seed must be an integer"),
    ("f,y\n" + "".join(f"{i},{i % 3}\n" for i in range(30)), {"test_size": 0.001}, "leaves 0 test rows"),
    ("f1,y,y\n" + "".join(f"{i},{i % 3},{i % 3}\n" for i in range(30)), {}, "duplicate column names \\['y'\\]"),
    ("f1,f1,y\n" + "".join(f"{i},{i},{i % 3}\n" for i in range(30)), {}, "duplicate column names \\['f1'\\]"),
    ("y\n" + "".join(f"{i % 3}\n" for i in range(30)), {}, "has no feature columns besides data.target='y'"),
    ("f,y\n" + "".join(f"{'inf' if i == 7 else i},{i % 3}\n" for i in range(30)), {"test_size": 0.5},
     "feature 'f' is infinite in data row 7 of data.path"),
    ("f,y\n" + "".join(f"{i},2\n" for i in range(30)), {}, "has a single class \\(2\\) in the training rows"),
    ("f,g,y\n" + "".join(f"1,5,{i % 3}\n" for i in range(30)), {}, "every feature column .* is constant"),
])
def test_csv_files_are_checked_when_read(tmp_path, text, kw, match):
    with pytest.raises(ValueError, match=match):
        from_file(_csv(tmp_path, text), "y", **kw)


@pytest.mark.parametrize("kw, match", [
    ({"n_train": "100"}, "data.n_train must be an integer >= 2; got '100'"),
    ({"n_train": -5}, "data.n_train must be an integer >= 2"),
    ({"n_train": 0}, "data.n_train must be an integer >= 2"),
    ({"n_classes": "4"}, "data.n_classes must be an integer in \\[2, 1000\\]"),
    ({"n_classes": 1}, "data.n_classes must be an integer in \\[2, 1000\\]"),
    ({"n_classes": 2.5}, "data.n_classes must be an integer in \\[2, 1000\\]"),
    ({"seed": -1}, "data.seed must be an integer in \\[0, "),
    ({"test_seed": 1.5}, "data.test_seed must be an integer"),
    ({"n_visible": 0}, "data.n_visible must be an integer >= 1"),
])
def test_quartiles_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        quartiles(**{"n_train": 100, "n_test": 50, **kw})


@pytest.mark.parametrize("kw, match", [({"test_size": 0}, "data.test_size must be a finite number in \\(0, 1\\)"),
                                       ({"test_size": 1.5}, "data.test_size must be a finite number in \\(0, 1\\)")])
def test_chisq_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        chisq(**kw)


@pytest.mark.parametrize("est, fit, match", [
    (dict(n_estimators=None), {}, "n_estimators must be an integer >= 0; got None"),
    (dict(random_state="x"), {}, "random_state must be an integer, a numpy RandomState or None"),
    (dict(objective="extended_qwk"), {"y": Y + 0.5}, "needs whole-numbered ordinal labels"),
    (dict(), {"early_stopping_rounds": 0, "eval_set": (X, Y)}, "early_stopping_rounds must be an integer >= 1"),
    (dict(), {"early_stopping_rounds": "3", "eval_set": (X, Y)}, "early_stopping_rounds must be an integer >= 1"),
    (dict(), {"y": np.array(["low", "high", "mid"] * 100)}, r"^y must be numeric; y\[0\] is 'low', which is not a "
                                                             r"number$"),
])
def test_native_estimator_checks(est, fit, match):
    y = fit.pop("y", Y)
    with pytest.raises(ValueError, match=match):
        NativeGBDTRegressor(n_estimators=est.pop("n_estimators", 5), **est).fit(X, y, **fit)


# -- issue 39: what gave a wrong result with no word -------------------------------------------------------------

def _ordinal_file(tmp_path, n=300, seed=0, name="t.csv"):
    rs = np.random.RandomState(seed)
    x = rs.randn(n)
    df = pd.DataFrame({"id": np.arange(n) * 3 + 11, "x": x, "z": rs.randn(n),
                       "y": np.digitize(x + 0.3 * rs.randn(n), [-0.6, 0.6])})
    df.to_csv(tmp_path / name, index=False)
    return df


def test_a_repeated_id_stops_the_command_before_the_test_share_is_held_out(tmp_path):
    """The check ran after the split: a repeated id drawn to both sides landed in oof.parquet and
    predictions.parquet. Here it is drawn to both sides, and named with its two data rows."""
    df = _ordinal_file(tmp_path)
    df.loc[9, "id"] = df.loc[4, "id"]
    df.to_csv(tmp_path / "t.csv", index=False)
    n_test = int(round(len(df) * 0.2))
    seed = next(s for s in range(100) if (np.flatnonzero(np.isin(np.random.RandomState(s).permutation(len(df)),
                                                                  [4, 9]))[:2] < n_test).sum() == 1)
    with pytest.raises(ValueError, match=r"^data.id='id' repeats the value 23 in data.path \(data rows 4 and 9\); "
                                         r"ids must be unique$"):
        from_file(str(tmp_path / "t.csv"), "y", id="id", test_size=0.2, seed=seed)


def test_numeric_classes_in_another_order_than_their_values_are_used_with_a_warning(tmp_path):
    _ordinal_file(tmp_path)
    with pytest.warns(UserWarning, match=r"data.classes=\[2, 0, 1\] ranks numeric labels otherwise than by their "
                                         r"value: 2 is taken as the lowest class and 1 as the highest.* list them "
                                         r"ascending \(data.classes=\[0, 1, 2\]\)"):
        ds = from_file(str(tmp_path / "t.csv"), "y", classes=[2, 0, 1])
    assert ds.labels.values == (2, 0, 1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_file(str(tmp_path / "t.csv"), "y", classes=[0, 1, 2])        # ascending: no word
    with pytest.warns(UserWarning, match=r"classes=\[1, 0, 2\] ranks numeric labels otherwise"):
        from qwkboost import QWKClassifier

        d = pd.read_csv(tmp_path / "t.csv")
        QWKClassifier(classes=[1, 0, 2], engine="lightgbm", num_boost_round=5, n_splits=2).fit(d[["x", "z"]], d["y"])


def test_an_ordered_categorical_target_and_other_data_classes_are_used_with_a_warning(tmp_path):
    df = _ordinal_file(tmp_path)
    words = ["low", "mid", "high"]
    df["grade"] = pd.Categorical(np.asarray(words, dtype=object)[df["y"]], categories=words, ordered=True)
    df.drop(columns="y").to_parquet(tmp_path / "t.parquet", index=False)
    with pytest.warns(UserWarning, match=r"data.classes=\['mid', 'low', 'high'\] orders the labels of "
                                         r"data.target='grade' in data.path otherwise than its ordered categories "
                                         r"\['low', 'mid', 'high'\]; data.classes is used"):
        ds = from_file(str(tmp_path / "t.parquet"), "grade", classes=["mid", "low", "high"])
    assert ds.labels.values == ("mid", "low", "high")


@pytest.mark.parametrize("edit, column, message", [
    (lambda d: d.assign(w=np.r_[-1, np.ones(len(d) - 1)].astype(np.int64)), {"weight": "w"},
     "data row 0 of data.path is -1$"),
    (lambda d: d.assign(g=7), {"group": "g"}, r"holds a single value \(7\)"),
    (lambda d: d.assign(y=np.where(d.index < 250, 2, 2)), {}, r"has a single class \(2\)"),
])
def test_messages_print_plain_numbers(tmp_path, edit, column, message):
    d = edit(_ordinal_file(tmp_path))
    d.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match=message) as err:
        from_file(str(tmp_path / "t.csv"), "y", **column)
    assert "np." not in str(err.value)
    with pytest.raises(ValueError, match=r"num_iteration must be an integer in \[0, 3\]; got 9$"):
        qb.train(X, Y, "xgboost", num_boost_round=3).predict(X, num_iteration=np.int64(9))
