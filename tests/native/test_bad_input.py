"""Bad and awkward input: NaN, inf, strings, constant features, a single row, parameters."""

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.native.params import resolve_params


def train(X, y, **kw):
    return qb.train(X, y, engine="native", objective="squared_error", **kw)


def test_nan_is_missing(with_missing):
    X, y = with_missing
    m = train(X, y, params={"max_depth": 3}, num_boost_round=30)
    pred = m.predict(X)
    assert np.isfinite(pred).all()
    assert np.mean((pred - y) ** 2) < 0.1 * y.var()
    # the missing rows of feature 1 carry y ~ 3 + 2 x0: the model learned where to send them
    nan1 = np.isnan(X[:, 1])
    assert abs(np.mean(pred[nan1] - y[nan1])) < 0.2


@pytest.mark.parametrize("where", ["X", "eval X"])
def test_inf_is_an_error(where):
    X = np.random.RandomState(0).normal(size=(30, 2))
    y = X[:, 0]
    bad = X.copy()
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="inf"):
        if where == "X":
            train(bad, y, num_boost_round=2)
        else:
            train(X, y, num_boost_round=2, eval_set=(bad, y))


def test_inf_in_y_and_strings_are_errors():
    X = np.random.RandomState(0).normal(size=(5, 2))
    with pytest.raises(ValueError, match="NaN or inf"):
        train(X, np.array([1.0, 2.0, np.inf, 0.0, 1.0]), num_boost_round=2)
    with pytest.raises(ValueError, match="numeric"):
        train([["a", "b"], ["c", "d"]], [1.0, 2.0], num_boost_round=2)
    m = train(X, X[:, 0], num_boost_round=2)
    with pytest.raises(ValueError, match="inf"):
        m.predict(np.full((2, 2), np.inf))
    with pytest.raises(ValueError, match="numeric"):
        m.booster.predict([["x", "y"]])
    with pytest.raises(ValueError, match="features"):
        m.booster.predict(np.zeros((2, 3)))


def test_constant_features_never_split():
    rs = np.random.RandomState(1)
    X = np.c_[np.full(200, 3.0), rs.normal(size=200), np.zeros(200)]
    y = X[:, 1] * 2
    m = train(X, y, params={"max_depth": 3}, num_boost_round=5)
    used = {int(f) for t in m.booster.trees for f in t.feature[t.feature >= 0]}
    assert used == {1}


@pytest.mark.parametrize("X", [np.ones((50, 2)), np.array([[1.0, 2.0]]), np.c_[np.full(6, np.nan), np.ones(6)]])
def test_nothing_to_split_on_is_refused(X):
    # all features constant (or a single row): every engine would only ever predict the mean
    with pytest.raises(ValueError, match="every feature is constant .* nothing to split on"):
        train(X, np.arange(float(len(X))), num_boost_round=3)


def test_a_value_and_missing_values_can_be_split():
    X = np.c_[np.r_[np.full(20, np.nan), np.ones(20)], np.ones(40)]
    y = np.r_[np.zeros(20), np.ones(20)]
    m = train(X, y, params={"max_depth": 1, "min_child_weight": 0}, num_boost_round=20)
    assert m.predict(X[:1])[0] < 0.2 < 0.8 < m.predict(X[-1:])[0]


def test_unknown_parameter_lists_the_valid_names():
    with pytest.raises(ValueError, match="unknown native-engine parameter 'max_dept'.*max_depth.*reg_lambda"):
        train(np.zeros((4, 1)), np.arange(4.0), params={"max_dept": 3}, num_boost_round=1)


@pytest.mark.parametrize("params, match", [
    ({"learning_rate": 0}, "learning_rate must be > 0"),
    ({"subsample": 1.5}, "subsample must be <= 1"),
    ({"max_bin": 300}, "max_bin must be <= 255"),
    ({"grow_policy": "breadth"}, "grow_policy must be one of"),
    ({"refit": "all"}, "refit must be one of"),
    ({"max_depth": 2.5}, "max_depth must be an integer"),
    ({"min_samples_leaf": 0}, "min_samples_leaf must be >= 1"),
    ({"max_leaves": 1}, "max_leaves must be 0"),
    ({"max_depth": 0}, "needs grow_policy='lossguide'"),
    ({"top_rate": 0.8, "other_rate": 0.5}, "top_rate \\+ other_rate"),
    ({"eta": 0.1, "learning_rate": 0.2}, "given twice"),
])
def test_bad_parameter_values(params, match):
    with pytest.raises(ValueError, match=match):
        resolve_params(params, 2)


def test_aliases():
    p = resolve_params({"eta": 0.05, "lambda": 2.0, "alpha": 0.5, "min_split_loss": 1.0, "nthread": 1}, 2)
    assert (p["learning_rate"], p["reg_lambda"], p["reg_alpha"], p["gamma"], p["n_jobs"]) == (0.05, 2.0, 0.5, 1.0, 1)
