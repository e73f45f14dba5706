"""Prediction: bit-mask ensemble prediction equals tree traversal; staged; leaf ids; thresholds."""

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.native.predictor import EnsemblePredictor, Tree, predict_tree


@pytest.fixture(scope="module")
def noisy():
    rs = np.random.RandomState(0)
    X = rs.normal(size=(1500, 5))
    X[rs.rand(*X.shape) < 0.1] = np.nan
    y = np.nansum(X ** 2, axis=1) + rs.normal(size=1500)
    Xt = rs.normal(size=(400, 5))
    Xt[rs.rand(*Xt.shape) < 0.2] = np.nan
    return X, y, Xt


@pytest.mark.parametrize("params", [
    {"max_depth": 3},                                          # <= 32 leaves: 32-bit masks
    {"max_depth": 6},                                          # <= 64 leaves: 64-bit masks
    {"max_depth": 8},                                          # > 64 leaves: level-by-level fallback
    {"grow_policy": "lossguide", "max_leaves": 40, "max_depth": 0},
])
def test_bitmask_prediction_equals_traversal(noisy, params):
    X, y, Xt = noisy
    b = qb.train(X, y, engine="native", objective="squared_error", params=params, num_boost_round=12).booster
    codes = b.bin_mapper.transform(Xt)
    per_tree = b.predictor.predict_trees(codes)
    for t, tree in enumerate(b.trees):
        np.testing.assert_allclose(per_tree[:, t], predict_tree(tree, codes), atol=1e-12)
    np.testing.assert_allclose(b.predict_margin(Xt, 7), per_tree[:, :7].sum(axis=1), atol=1e-12)


def test_small_blocks_and_single_leaf_trees(noisy):
    X, y, Xt = noisy
    b = qb.train(X, y, engine="native", objective="squared_error", params={"max_depth": 2},
                 num_boost_round=9).booster
    codes = b.bin_mapper.transform(Xt)
    stump = Tree([-1], [0], [np.inf], [False], [-1], [-1], [0.25], [0.0], [1.0], [1])
    trees = b.trees + [stump]
    ref = sum(predict_tree(t, codes) for t in trees)
    np.testing.assert_allclose(EnsemblePredictor(trees, 5, block=4).predict(codes), ref, atol=1e-12)


def test_staged_predictions(noisy):
    X, y, Xt = noisy
    m = qb.train(X, y, engine="native", objective="squared_error", params={"max_depth": 3}, num_boost_round=8)
    staged = list(m.booster.staged_predict(Xt))
    assert len(staged) == 8
    for k, s in enumerate(staged, start=1):
        np.testing.assert_allclose(s, m.predict(Xt, num_iteration=k), atol=1e-12)


def test_thresholds_read_as_raw_value_rules(noisy):
    X, y, Xt = noisy
    b = qb.train(X, y, engine="native", objective="squared_error", params={"max_depth": 4},
                 num_boost_round=3).booster
    tree = b.trees[0]
    # walk the tree with raw values: x < threshold, NaN follows default_left
    out = np.empty(len(Xt))
    for i, x in enumerate(Xt):
        j = 0
        while tree.feature[j] >= 0:
            v = x[tree.feature[j]]
            left = tree.default_left[j] if np.isnan(v) else v < tree.threshold[j]
            j = tree.left[j] if left else tree.right[j]
        out[i] = tree.value[j]
    np.testing.assert_allclose(out, tree.predict(b.bin_mapper.transform(Xt)))
    leaves = b.apply(Xt)
    assert leaves.shape == (len(Xt), 3) and np.all(tree.feature[leaves[:, 0]] < 0)


def test_training_scores_equal_predictions(noisy):
    X, y, _ = noisy
    seen = []
    m = qb.train(X, y, engine="native", objective="squared_error", params={"max_depth": 4},
                 num_boost_round=6, callbacks=[lambda r, e: seen.append(e["train"]["rmse"])])
    rmse = np.sqrt(np.mean((m.predict(X) - y) ** 2))
    assert seen[-1] == pytest.approx(rmse, rel=1e-10)
