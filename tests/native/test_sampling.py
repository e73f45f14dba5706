"""Row/column sampling and GOSS (Ke et al. 2017)."""

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.native.sampling import column_mask, goss, goss_active, row_subsample


def test_row_subsample():
    rng = np.random.default_rng(0)
    assert row_subsample(100, 1.0, rng) is None
    r = row_subsample(1000, 0.3, rng)
    assert r.size == 300 and np.all(np.diff(r) > 0) and r.max() < 1000
    assert row_subsample(10, 0.01, rng).size == 1


def test_column_mask():
    rng = np.random.default_rng(0)
    assert column_mask(5, 1.0, rng) is None
    m = column_mask(10, 0.5, rng)
    assert m.dtype == bool and m.sum() == 5
    assert column_mask(3, 0.01, rng).sum() == 1


def test_goss_keeps_top_gradients_and_reweights_the_rest():
    rng = np.random.default_rng(0)
    g = np.random.RandomState(1).normal(size=1000)
    rows, w = goss(g, 0.2, 0.1, rng)
    assert rows.size == 300 and np.all(np.diff(rows) > 0)
    top = np.argsort(-np.abs(g))[:200]
    assert set(top) <= set(rows)
    assert np.all(w[np.isin(rows, top)] == 1.0)
    np.testing.assert_allclose(w[~np.isin(rows, top)], (1 - 0.2) / 0.1)
    # the reweighted small gradients estimate the sum of all small ones
    small = np.setdiff1d(np.arange(1000), top)
    est = (g[rows] * w)[~np.isin(rows, top)].sum()
    assert abs(est - g[small].sum()) < 4 * np.sqrt(small.size) * np.abs(g[small]).mean() * 3
    # everything is kept when a + b >= 1
    rows, w = goss(g, 0.5, 0.5, rng)
    assert rows.size == 1000 and np.all(w == 1)


def test_goss_breaks_ties_by_row_index():
    """Rows with equal |g| (one leaf's rows share a gradient under squared error) are taken lowest index first, so
    the kept rows do not depend on which NumPy selection kernel the CPU runs."""
    g = np.random.RandomState(2).choice([-1.5, -0.5, 0.25, 0.5, 1.5], size=2000)
    for top_rate in (0.1, 0.25, 0.4):
        rows, w = goss(g, top_rate, 0.1, np.random.default_rng(0))
        expected = np.sort(np.argsort(-np.abs(g), kind="stable")[: int(top_rate * g.size)])
        np.testing.assert_array_equal(rows[w == 1.0], expected)


def test_goss_waits_one_over_learning_rate_rounds():
    assert not goss_active(9, 0.1) and goss_active(10, 0.1)
    assert not goss_active(0, 1.0) and goss_active(1, 1.0)


@pytest.fixture(scope="module")
def data():
    rs = np.random.RandomState(0)
    X = rs.normal(size=(3000, 5))
    y = X[:, 0] ** 2 + np.sin(2 * X[:, 1]) + rs.normal(scale=0.2, size=3000)
    return X, y


def test_goss_training_matches_plain_training_before_it_starts(data):
    X, y = data
    p = {"max_depth": 3, "learning_rate": 0.25}
    plain = qb.train(X, y, engine="native", objective="squared_error", params=p, num_boost_round=6)
    gs = qb.train(X, y, engine="native", objective="squared_error", params={**p, "sampling_method": "goss"},
                  num_boost_round=6)
    np.testing.assert_allclose(gs.predict(X, num_iteration=4), plain.predict(X, num_iteration=4))
    assert not np.allclose(gs.predict(X), plain.predict(X))
    mse = lambda m: np.mean((m.predict(X) - y) ** 2)
    assert mse(gs) < 1.3 * mse(plain)


@pytest.mark.parametrize("params", [{"subsample": 0.5}, {"colsample_bytree": 0.4},
                                    {"sampling_method": "goss", "learning_rate": 0.5}])
def test_sampling_still_learns(data, params):
    X, y = data
    m = qb.train(X, y, engine="native", objective="squared_error", params={"max_depth": 3, **params},
                 num_boost_round=30)
    assert np.mean((m.predict(X) - y) ** 2) < 0.3 * y.var()
    if "colsample_bytree" in params:
        used = {int(f) for t in m.booster.trees for f in t.feature[t.feature >= 0]}
        per_tree = [set(t.feature[t.feature >= 0]) for t in m.booster.trees]
        assert all(len(s) <= 2 for s in per_tree) and len(used) > 2
