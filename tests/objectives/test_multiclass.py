"""multiclass: softmax gradients against finite differences, log-prior start, XGBoost's multi:softprob, every
engine end to end (decoded score, probabilities, saved models), weights, bad input."""

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.objectives import get
from qwkboost.objectives.multiclass import softmax


def _loss_sum(obj, y, s):
    return obj.metric(y, s) * y.size


@pytest.mark.parametrize("hessian, factor", [("diagonal", 1.0), ("xgboost", 2.0)])
def test_gradients_and_hessians_against_finite_differences(hessian, factor):
    rs = np.random.RandomState(0)
    y = rs.randint(1, 5, 30).astype(float)
    obj = get("multiclass", hessian=hessian).fit(y)
    s = rs.normal(size=(30, 4))
    g, h = obj.grad_hess(y, s)
    eps = 1e-5
    for i, k in [(0, 0), (3, 2), (17, 3), (29, 1)]:
        up, dn = s.copy(), s.copy()
        up[i, k] += eps
        dn[i, k] -= eps
        fd_g = (_loss_sum(obj, y, up) - _loss_sum(obj, y, dn)) / (2 * eps)
        fd_h = (_loss_sum(obj, y, up) - 2 * _loss_sum(obj, y, s) + _loss_sum(obj, y, dn)) / eps ** 2
        assert g[i, k] == pytest.approx(fd_g, rel=1e-6, abs=1e-8)
        assert h[i, k] == pytest.approx(factor * fd_h, rel=1e-3)
    assert obj.hessian_kind == ("exact" if hessian == "diagonal" else "approximate")


def test_it_starts_from_the_log_priors_and_decodes_to_the_expected_class():
    y = np.array([3, 4, 4, 6, 6, 6, 6.0])                  # 5 is an empty class of the scale 3..6
    obj = get("multiclass").fit(y)
    assert obj.n_outputs_ == 4
    np.testing.assert_allclose(np.exp(obj.init_score_), [1 / 7, 2 / 7, 1e-12, 4 / 7], rtol=1e-9)
    s = np.tile(obj.init_score_, (2, 1))
    np.testing.assert_allclose(obj.decode(s), (3 * 1 + 4 * 2 + 6 * 4) / 7, rtol=1e-9)
    np.testing.assert_allclose(obj.predict_proba(s).sum(axis=1), 1.0)


def test_weights_equal_repeated_rows():
    rs = np.random.RandomState(1)
    y = rs.randint(0, 3, 40).astype(float)
    w = rs.randint(1, 4, 40)
    s = rs.normal(size=(40, 3))
    a, b = get("multiclass").fit(y, sample_weight=w), get("multiclass").fit(np.repeat(y, w))
    np.testing.assert_allclose(a.init_score_, b.init_score_)
    g, h = a.grad_hess(y, s, sample_weight=w)
    gr, hr = b.grad_hess(np.repeat(y, w), np.repeat(s, w, axis=0))
    owner = np.repeat(np.arange(40), w)
    for k in range(3):
        np.testing.assert_allclose(g[:, k], np.bincount(owner, gr[:, k]), atol=1e-12)
        np.testing.assert_allclose(h[:, k], np.bincount(owner, hr[:, k]), atol=1e-12)
    assert a.metric(y, s, w) == pytest.approx(b.metric(np.repeat(y, w), np.repeat(s, w, axis=0)))


@pytest.fixture(scope="module")
def data():
    from qwkboost.data.sources import quartiles

    ds = quartiles(n_train=8000, n_test=4000)
    return ds.X_train, ds.y_train + 1, ds.X_test, ds.y_test + 1          # labels 1..4


def test_through_xgboost_it_equals_multi_softprob_from_the_same_margin(data):
    import xgboost as xgb

    X, y, Xt, _ = data
    p = {"learning_rate": 0.1, "max_depth": 4}
    m = qb.train(X, y, "xgboost", "multiclass", p, num_boost_round=30)
    f0 = np.asarray(m.init_score)
    d = xgb.DMatrix(X, label=y - 1, base_margin=np.tile(f0, (len(y), 1)))
    b = xgb.train({**p, "objective": "multi:softprob", "num_class": 4, "base_score": 0.0, "seed": 0}, d, 30)
    ref = b.predict(xgb.DMatrix(Xt, base_margin=np.tile(f0, (len(Xt), 1))))
    np.testing.assert_allclose(m.predict_proba(Xt), ref, atol=1e-5)


def test_native_multiclass_matches_xgboost_softprob_log_loss(data):
    import xgboost as xgb

    X, y, Xt, yt = data
    p = {"learning_rate": 0.1, "max_depth": 4}
    nat = qb.train(X, y, "native", "multiclass", p, num_boost_round=60)
    b = xgb.train({**p, "objective": "multi:softprob", "num_class": 4, "seed": 0}, xgb.DMatrix(X, label=y - 1), 60)
    ll = lambda P: -np.mean(np.log(P[np.arange(len(yt)), (yt - 1).astype(int)]))
    ours, theirs = ll(nat.predict_proba(Xt)), ll(b.predict(xgb.DMatrix(Xt)))
    assert abs(ours / theirs - 1) < 0.01, (ours, theirs)


@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "native"])
def test_every_engine_decodes_saves_and_loads(engine, data, tmp_path):
    X, y, Xt, yt = data
    m = qb.train(X, y, engine, "multiclass", {"learning_rate": 0.2}, num_boost_round=40, eval_set=(Xt, yt),
                 early_stopping_rounds=5)
    P = m.predict_proba(Xt)
    assert P.shape == (len(Xt), 4) and np.allclose(P.sum(axis=1), 1.0)
    np.testing.assert_allclose(m.predict(Xt), P @ [1, 2, 3, 4])           # decoded: the expected class
    assert m.evals_result["valid"]["logloss"][m.best_iteration - 1] < 1.2   # the priors alone give about 1.39
    assert qb.qwk(yt - 1, P.argmax(axis=1)) > 0.5
    back = qb.load_model(m.save(tmp_path / "m.json"))
    np.testing.assert_array_equal(back.predict_proba(Xt), P)
    assert back.predict_raw(Xt[:3]).shape == (3, 4)
    np.testing.assert_allclose(m.predict_raw(Xt[:5], num_iteration=0), np.tile(m.init_score, (5, 1)))


@pytest.mark.parametrize("y, match", [
    (np.r_[np.zeros(50), np.full(50, 1.5)], r"needs whole-numbered ordinal labels; y\[50\] is 1.5"),
    (np.ones(100), r"single class \(1\)"),
    (np.arange(100) * 2.0, r"spans 199 classes \(0..198\); class objectives take at most 100"),
])
def test_bad_targets_are_refused_before_training(y, match):
    X = np.random.RandomState(0).rand(100, 2)
    with pytest.raises(ValueError, match=match):
        qb.train(X, y, "native", "multiclass", num_boost_round=1)


def test_an_experiment_logs_class_probabilities(tiny_cfg, tmp_path):
    import mlflow

    from qwkboost import tracking
    from qwkboost.runs.experiment import run_experiment

    cfg = {**tiny_cfg, "objective": {"name": "multiclass", "params": {}}}
    exp = tracking.setup(cfg["tracking"]["uri"], cfg["tracking"]["experiment_name"])
    row = run_experiment(cfg, exp, output_dir=tmp_path)
    assert row["qwk_thresholds"] > 0.5
    client = mlflow.MlflowClient(cfg["tracking"]["uri"])
    plots = {a.path for a in client.list_artifacts(row["run_id"], "plots")}
    assert "plots/class_probabilities.png" in plots
    assert "valid_logloss" in client.get_run(row["run_id"]).data.metrics
    pipe = qb.load_run(tmp_path)
    import pandas as pd

    pred = pd.read_parquet(tmp_path / "predictions.parquet")
    from qwkboost.data.sources import quartiles

    Xt = quartiles(n_train=1500, n_test=800).X_test
    np.testing.assert_allclose(pipe.predict_score(Xt), pred["score"])
