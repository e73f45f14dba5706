"""The same seed gives the same model, also with every kind of sampling and threads."""

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.native import grower

SAMPLING = {"subsample": 0.6, "colsample_bytree": 0.6}
GOSS = {"sampling_method": "goss", "learning_rate": 0.5}


@pytest.mark.parametrize("params", [{}, SAMPLING, GOSS])
def test_same_seed_same_numbers(chisq_small, params):
    X, y = chisq_small
    fit = lambda seed: qb.train(X, y, engine="native", objective="squared_error",
                                params={"max_depth": 4, **params}, num_boost_round=12, seed=seed)
    a, b = fit(5), fit(5)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert a.evals_result == b.evals_result
    if params:
        assert not np.array_equal(a.predict(X), fit(6).predict(X))


def test_threads_do_not_change_the_model(chisq_small, monkeypatch):
    X, y = chisq_small
    p = {"max_depth": 4, **SAMPLING}
    one = qb.train(X, y, engine="native", objective="squared_error", params={**p, "n_jobs": 1},
                   num_boost_round=8, seed=1)
    monkeypatch.setattr(grower, "PARALLEL_MIN_NODE_ROWS", 10)
    two = qb.train(X, y, engine="native", objective="squared_error", params={**p, "n_jobs": 2},
                   num_boost_round=8, seed=1)
    np.testing.assert_array_equal(one.predict(X), two.predict(X))
    for a, b in zip(one.booster.trees, two.booster.trees):
        np.testing.assert_array_equal(a.feature, b.feature)
