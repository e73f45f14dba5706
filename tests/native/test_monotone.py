"""Monotone constraints (as in XGBoost): the whole ensemble is monotone, checked on random probes."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import qwkboost as qb
from qwkboost.native.boosting import train_booster
from qwkboost.objectives import get as get_objective


def monotone_violation(booster, X, constraints, rs, n_base=40, n_grid=25, nan_rate=0.2):
    """Largest step against a constraint along any constrained feature, from random base points."""
    F = X.shape[1]
    lo, hi = np.nanmin(X, axis=0), np.nanmax(X, axis=0)
    worst = 0.0
    for f in np.flatnonzero(constraints):
        base = rs.uniform(lo - 0.5, hi + 0.5, size=(n_base, F))
        base[rs.rand(n_base, F) < nan_rate] = np.nan       # other features missing, too
        grid = np.sort(np.r_[rs.uniform(lo[f] - 1, hi[f] + 1, n_grid - 2), lo[f] - 5, hi[f] + 5])
        P = np.repeat(base, grid.size, axis=0)
        P[:, f] = np.tile(grid, n_base)
        pred = booster.predict(P).reshape(n_base, grid.size)
        steps = np.diff(pred, axis=1) * constraints[f]
        worst = max(worst, float(-steps.min()))
    return worst


@st.composite
def problems(draw):
    seed = draw(st.integers(0, 10_000))
    F = draw(st.integers(1, 4))
    cons = np.array(draw(st.lists(st.sampled_from([-1, 0, 1]), min_size=F, max_size=F)))
    if not cons.any():
        cons[draw(st.integers(0, F - 1))] = draw(st.sampled_from([-1, 1]))
    params = {
        "max_depth": draw(st.integers(1, 5)),
        "learning_rate": draw(st.sampled_from([0.1, 0.3, 1.0])),
        "grow_policy": draw(st.sampled_from(["depthwise", "lossguide"])),
        "refit": draw(st.sampled_from(["none", "leaves", "step"])),
        "reg_lambda": draw(st.sampled_from([0.0, 1.0])),
        "min_child_weight": draw(st.sampled_from([0.0, 1.0, 5.0])),
        "subsample": draw(st.sampled_from([1.0, 0.7])),
    }
    if params["grow_policy"] == "lossguide":
        params["max_leaves"] = draw(st.integers(2, 20))
    return seed, cons, params


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_whole_ensemble_is_monotone(problem):
    seed, cons, params = problem
    rs = np.random.RandomState(seed)
    n, F = 300, cons.size
    X = rs.normal(size=(n, F))
    # a target that breaks the constraints locally: monotonicity must come from the learner
    y = (X * cons).sum(axis=1) + np.sin(3 * X).sum(axis=1) + rs.normal(scale=0.5, size=n)
    X[rs.rand(n, F) < 0.1] = np.nan
    obj = get_objective("squared_error").fit(y)
    booster, *_ = train_booster(X, y, obj, {**params, "monotone_constraints": cons.tolist()}, 12, seed=seed)
    assert monotone_violation(booster, X, cons, rs) <= 1e-9


def test_constraint_changes_the_fit_and_unconstrained_is_not_monotone():
    rs = np.random.RandomState(0)
    X = rs.uniform(-2, 2, size=(800, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1]
    free = qb.train(X, y, engine="native", objective="squared_error", params={"max_depth": 4},
                    num_boost_round=30).booster
    tied = qb.train(X, y, engine="native", objective="squared_error",
                    params={"max_depth": 4, "monotone_constraints": (1, 0)}, num_boost_round=30).booster
    cons = np.array([1, 0])
    assert monotone_violation(free, X, cons, np.random.RandomState(1), nan_rate=0.0) > 0.1
    assert monotone_violation(tied, X, cons, np.random.RandomState(1)) <= 1e-9


def test_xgboost_string_and_dict_forms():
    rs = np.random.RandomState(2)
    X = rs.normal(size=(300, 3))
    y = X[:, 0] - X[:, 2] + np.cos(2 * X[:, 0])
    a = qb.train(X, y, engine="native", objective="squared_error",
                 params={"monotone_constraints": "(1,0,-1)"}, num_boost_round=10)
    b = qb.train(X, y, engine="native", objective="squared_error",
                 params={"monotone_constraints": {0: 1, 2: -1}}, num_boost_round=10)
    np.testing.assert_allclose(a.predict(X), b.predict(X))
    assert monotone_violation(a.booster, X, np.array([1, 0, -1]), rs) <= 1e-9


@pytest.mark.parametrize("bad, match", [([1, 0], "length 2 but X has 3"), ([1, 0, 2], "-1, 0 or \\+1"),
                                        ({5: 1}, "feature index 5")])
def test_bad_constraints(bad, match):
    X = np.zeros((10, 3))
    with pytest.raises(ValueError, match=match):
        qb.train(X, np.arange(10.0), engine="native", objective="squared_error",
                 params={"monotone_constraints": bad}, num_boost_round=1)
