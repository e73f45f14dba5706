"""Sample weights in every stage: with integer weights each equals the data with rows repeated."""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

import qwkboost as qb
from qwkboost.data.sources import from_file
from qwkboost.evaluation.metrics import rmse
from qwkboost.objectives import Objective, get
from qwkboost.evaluation.thresholds import fit_exact, fit_distribution, fit_nelder_mead


@pytest.fixture(scope="module")
def data():
    rs = np.random.RandomState(0)
    n = 600
    X = rs.randint(0, 20, (n, 3)).astype(float)            # < 255 values: the same bins with rows repeated
    y = np.clip(np.round(X[:, 0] / 5 + rs.normal(size=n) * 0.5), 0, 3)
    w = rs.randint(1, 4, n)
    return X, y, w, np.repeat(X, w, axis=0), np.repeat(y, w)


def test_metrics_equal_repeated_rows_and_scikit_learn(data):
    _, y, w, _, yr = data
    rs = np.random.RandomState(1)
    pred = np.clip(y + rs.randint(-1, 2, y.size), 0, 3)
    score = y + rs.normal(size=y.size)
    assert qb.qwk(y, pred, sample_weight=w) == pytest.approx(qb.qwk(yr, np.repeat(pred, w)), abs=1e-12)
    assert qb.qwk(y, pred, sample_weight=w) == pytest.approx(
        cohen_kappa_score(y, pred, weights="quadratic", sample_weight=w), abs=1e-12)
    assert qb.extended_qwk(y, score, sample_weight=w) == pytest.approx(qb.extended_qwk(yr, np.repeat(score, w)))
    assert rmse(y, score, w) == pytest.approx(rmse(yr, np.repeat(score, w)))
    with pytest.raises(ValueError, match=r"sample_weight must be >= 0; sample_weight\[3\] is -1.0"):
        qb.qwk(y, pred, sample_weight=np.r_[w[:3], -1, w[4:]])


@pytest.mark.parametrize("name, params", [("squared_error", {}), ("extended_qwk", {}),
                                          ("extended_qwk", {"hessian": "gauss_newton", "clip": "hold"})])
def test_objective_sums_equal_repeated_rows(data, name, params):
    """Per-row gradients and hessians with weight w equal the sum over the row's w copies (what a
    histogram adds up); the initial score, metric and loss equal the repeated data's."""
    _, y, w, _, yr = data
    score = y + np.random.RandomState(2).normal(size=y.size)
    a, b = get(name, **params).fit(y, sample_weight=w), get(name, **params).fit(yr)
    assert a.init_score_ == pytest.approx(b.init_score_)
    g, h = a.grad_hess(y, score, sample_weight=w)
    gr, hr = b.grad_hess(yr, np.repeat(score, w))
    owner = np.repeat(np.arange(y.size), w)
    np.testing.assert_allclose(g, np.bincount(owner, gr), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(h, np.bincount(owner, hr), rtol=1e-9)
    assert a.metric(y, score, sample_weight=w) == pytest.approx(b.metric(yr, np.repeat(score, w)))
    assert a.loss(y, score, sample_weight=w) == pytest.approx(b.loss(yr, np.repeat(score, w)))


@pytest.mark.parametrize("engine", ["native", "xgboost"])
@pytest.mark.parametrize("objective", ["squared_error", "extended_qwk"])
def test_weighted_training_equals_repeated_rows(data, engine, objective):
    X, y, w, Xr, yr = data
    a = qb.train(X, y, engine, objective, {"max_depth": 3}, num_boost_round=20, sample_weight=w)
    b = qb.train(Xr, yr, engine, objective, {"max_depth": 3}, num_boost_round=20)
    np.testing.assert_allclose(a.predict(X), b.predict(X), atol=1e-5)      # XGBoost keeps scores in float32
    m = a.objective.metric_name
    assert a.evals_result["train"][m][-1] == pytest.approx(b.evals_result["train"][m][-1], abs=1e-6)


def test_lightgbm_weights_as_lightgbm_weighs_its_own_objective(data):
    """LightGBM estimates leaf row counts from hessian sums, so its own weights do not equal repeated rows
    either; qwkboost's weighted squared error gives what LightGBM's weighted ``regression`` gives."""
    import lightgbm as lgb

    X, y, w, _, _ = data
    p = {"num_leaves": 8, "learning_rate": 0.3, "verbose": -1}
    own = lgb.train({**p, "objective": "regression"}, lgb.Dataset(X, y, weight=w), 20)
    ours = qb.train(X, y, "lightgbm", "squared_error", p, num_boost_round=20, sample_weight=w)
    np.testing.assert_allclose(ours.predict(X), own.predict(X), atol=1e-6)


class _Huber(Objective):
    """A user objective written without sample_weight: the engines weigh its terms."""

    def grad_hess(self, y, score):
        r = score - y
        s = 1.0 + r * r
        return r / np.sqrt(s), s ** -1.5


def test_an_objective_without_a_weight_argument_is_weighted_by_the_engine(data):
    X, y, w, Xr, yr = data
    a = qb.train(X, y, "native", _Huber(), {"max_depth": 3}, num_boost_round=15, sample_weight=w)
    b = qb.train(Xr, yr, "native", _Huber(), {"max_depth": 3}, num_boost_round=15)
    np.testing.assert_allclose(a.predict(X), b.predict(X), atol=1e-9)


@pytest.mark.parametrize("fit", [fit_exact, fit_distribution, fit_nelder_mead])
def test_thresholds_equal_repeated_rows(fit):
    rs = np.random.RandomState(3)
    y = rs.randint(0, 4, 400)
    s = y + rs.normal(size=400) * 0.8
    w = rs.randint(1, 4, 400)
    np.testing.assert_allclose(fit(s, y, sample_weight=w), fit(np.repeat(s, w), np.repeat(y, w)))


def test_weighted_exact_cuts_maximise_the_weighted_qwk():
    from qwkboost.evaluation.thresholds import apply_thresholds

    rs = np.random.RandomState(4)
    y = rs.randint(0, 4, 500)
    s = y + rs.normal(size=500)
    w = rs.rand(500) * 3 + 0.05                             # real-valued weights
    best = qb.qwk(y, apply_thresholds(s, fit_exact(s, y, sample_weight=w)), sample_weight=w)
    for cuts in (fit_exact(s, y), fit_nelder_mead(s, y, sample_weight=w), fit_distribution(s, y, sample_weight=w)):
        assert best >= qb.qwk(y, apply_thresholds(s, cuts), sample_weight=w) - 1e-12


def test_a_weight_column_in_a_csv(tmp_path, data):
    X, y, w, _, _ = data
    df = pd.DataFrame(X, columns=["a", "b", "c"]).assign(y=y.astype(int), w=w)
    df.to_csv(tmp_path / "d.csv", index=False)
    ds = from_file(str(tmp_path / "d.csv"), "y", weight="w", test_size=0.25)
    assert ds.feature_names == ["a", "b", "c"] and ds.w_train.size == 450 and ds.w_test.size == 150
    df.assign(w=np.r_[w[:10], -2, w[11:]]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match=r"data.weight='w' must hold finite numbers >= 0; data row 10 of data.path"):
        from_file(str(tmp_path / "bad.csv"), "y", weight="w", test_size=0.25, seed=1)


def test_an_experiment_with_weights_reports_weighted_metrics(tmp_path, data):
    from qwkboost.runs.experiment import run_experiment
    from qwkboost.evaluation.thresholds import apply_thresholds

    X, y, w, _, _ = data
    pd.DataFrame(X, columns=["a", "b", "c"]).assign(y=y.astype(int), w=w).to_csv(tmp_path / "d.csv", index=False)
    cfg = {"data": {"name": "csv", "_target_": "qwkboost.data.from_file", "path": str(tmp_path / "d.csv"),
                    "target": "y", "weight": "w", "test_size": 0.25, "seed": 0},
           "engine": {"name": "native", "num_boost_round": 30, "early_stopping_rounds": 10,
                      "params": {"max_depth": 3, "learning_rate": 0.3}},
           "objective": {"name": "extended_qwk", "params": {}}, "cv": {"n_splits": 3},
           "thresholds": {"method": "exact"}, "seed": 0}
    row = run_experiment(cfg, output_dir=tmp_path / "out")
    oof = pd.read_parquet(tmp_path / "out" / "oof.parquet")
    ds = from_file(str(tmp_path / "d.csv"), "y", weight="w", test_size=0.25)
    cls = apply_thresholds(oof["score"], row["thresholds"])
    assert row["qwk_thresholds_oof"] == pytest.approx(qb.qwk(ds.y_train, cls, sample_weight=ds.w_train))
    assert row["qwk_thresholds_oof"] != pytest.approx(qb.qwk(ds.y_train, cls))     # the weights matter
