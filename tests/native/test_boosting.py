"""The boosting loop: learning rate, early stopping, callbacks, refits, faithfulness to XGBoost."""

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.native.binning import BinMapper
from qwkboost.native.boosting import _line_search, train_booster
from qwkboost.objectives import get as get_objective


def obj(name, y, **kw):
    return get_objective(name, **kw).fit(y)


def test_loss_decreases_and_learning_rate_scales_the_first_tree(chisq_small):
    X, y = chisq_small
    curves = {}
    for lr in (0.1, 0.5):
        b, n, best, ev = train_booster(X, y, obj("squared_error", y), {"learning_rate": lr, "max_depth": 3}, 20)
        curves[lr] = ev["train"]["rmse"]
        assert n == best == 20 and len(b.trees) == 20
        assert np.all(np.diff(curves[lr]) < 0)
    b1, *_ = train_booster(X, y, obj("squared_error", y), {"learning_rate": 1.0, "max_depth": 3}, 1)
    b5, *_ = train_booster(X, y, obj("squared_error", y), {"learning_rate": 0.5, "max_depth": 3}, 1)
    np.testing.assert_allclose(b5.trees[0].value, 0.5 * b1.trees[0].value)
    assert curves[0.5][5] < curves[0.1][5]


def test_early_stopping_and_callbacks(chisq_small):
    X, y = chisq_small
    seen = []
    m = qb.train(X[:1000], y[:1000], engine="native", objective="squared_error",
                 params={"max_depth": 6, "learning_rate": 0.8, "reg_lambda": 0.0, "min_child_weight": 0.0},
                 num_boost_round=500, eval_set=(X[1000:], y[1000:]), early_stopping_rounds=5,
                 callbacks=[lambda r, e: seen.append((r, e))])
    valid = m.evals_result["valid"]["rmse"]
    assert m.num_rounds < 500 and m.num_rounds == len(valid) == len(seen)
    assert m.best_iteration == int(np.argmin(valid)) + 1
    assert m.num_rounds - m.best_iteration == 5
    assert seen[0][0] == 0 and set(seen[0][1]) == {"train", "valid"}
    assert seen[-1][1]["valid"]["rmse"] == valid[-1]
    # predict uses the best iteration by default
    np.testing.assert_allclose(m.predict(X[1000:]), m.predict(X[1000:], num_iteration=m.best_iteration))


def test_early_stopping_on_a_higher_is_better_metric(small_quartiles):
    ds = small_quartiles
    m = qb.train(ds.X_train, ds.y_train, engine="native", objective="extended_qwk",
                 params={"max_depth": 3, "learning_rate": 0.3}, num_boost_round=300,
                 eval_set=(ds.X_test, ds.y_test), early_stopping_rounds=10)
    k = m.evals_result["valid"]["kappa"]
    assert m.best_iteration == int(np.argmax(k)) + 1


def test_line_search_finds_the_minimum():
    assert _line_search(lambda r: (r - 3.3) ** 2) == pytest.approx(3.3, abs=1e-3)
    assert _line_search(lambda r: (r - 0.2) ** 2) == pytest.approx(0.2, abs=1e-3)
    assert _line_search(lambda r: r) == 0.0


def test_refit_leaves_gives_the_mean_residual_for_squared_error(chisq_small):
    # Friedman's per-leaf step on squared error is the leaf's mean residual (Friedman 2001, Algorithm 1)
    X, y = chisq_small
    o = obj("squared_error", y)
    b, *_ = train_booster(X, y, o, {"max_depth": 2, "learning_rate": 1.0, "reg_lambda": 5.0,
                                    "refit": "leaves"}, 1)
    t = b.trees[0]
    leaf = t.apply(b.bin_mapper.transform(X))
    for j in np.unique(leaf):
        assert t.value[j] == pytest.approx((y - y.mean())[leaf == j].mean(), rel=1e-3)


@pytest.mark.parametrize("refit", ["leaves", "step"])
def test_refit_lowers_the_true_loss_of_each_round(small_quartiles, refit):
    ds = small_quartiles
    X, y = ds.X_train, ds.y_train
    p = {"max_depth": 3, "learning_rate": 1.0}
    base, *_ = train_booster(X, y, obj("extended_qwk", y), p, 1)
    o = obj("extended_qwk", y)
    ref, *_ = train_booster(X, y, o, {**p, "refit": refit}, 1)
    loss = lambda b: o.loss(y, b.predict(X))
    assert loss(ref) < loss(base)
    # and over many rounds it still trains
    many, *_ = train_booster(X, y, obj("extended_qwk", y), {"max_depth": 3, "learning_rate": 0.3, "refit": refit}, 20)
    assert loss(many) < loss(base)


def xgboost_cuts(X, max_bin=255):
    xgb = pytest.importorskip("xgboost")
    d = xgb.QuantileDMatrix(X, max_bin=max_bin)
    ptr, cuts = (np.asarray(a) for a in d.get_quantile_cut())
    bm = BinMapper()
    # XGBoost: first entry is a sentinel below the minimum, last one above the maximum
    bm.edges_ = [cuts[ptr[f] + 1: ptr[f + 1] - 1].astype(np.float64) for f in range(X.shape[1])]
    bm.n_bins_ = np.array([e.size + 1 for e in bm.edges_])
    return bm


def test_same_cut_points_give_xgboost_hist_trees(chisq_small):
    """With XGBoost's own cut points the native engine reproduces XGBoost hist (squared error)."""
    xgb = pytest.importorskip("xgboost")
    X, y = chisq_small
    X = X.astype(np.float32).astype(np.float64)          # XGBoost stores float32
    for depth in (1, 2):
        p = {"max_depth": depth, "learning_rate": 0.3}
        ours, *_ = train_booster(X, y, obj("squared_error", y), p, 30, bin_mapper=xgboost_cuts(X))
        ref = qb.train(X, y, engine="xgboost", objective="squared_error",
                       params={**p, "nthread": 1, "max_bin": 255}, num_boost_round=30)
        np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-5, atol=1e-4)


def test_foreign_bins_beyond_the_code_range_are_refused(chisq_small):
    X, y = chisq_small
    bm = xgboost_cuts(X)
    bm.n_bins_ = bm.n_bins_.copy()
    bm.n_bins_[1] = 256                                   # value bin 255 would be the missing bin
    with pytest.raises(ValueError, match="bin_mapper must have n_bins_ .* at most 255"):
        train_booster(X, y, obj("squared_error", y), {}, 2, bin_mapper=bm)


def test_non_finite_gradients_are_reported():
    from qwkboost.objectives import Objective

    class Bad(Objective):
        def grad_hess(self, y, score):
            return np.full_like(score, np.nan), np.ones_like(score)

    X = np.random.RandomState(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="non-finite gradients"):
        train_booster(X, X[:, 0], Bad().fit(X[:, 0]), {}, 2)

    class BadHessian(Objective):
        def grad_hess(self, y, score):
            h = np.ones_like(score)
            h[3] = np.inf
            return score - y, h

    with pytest.raises(ValueError, match="non-finite gradients at round 0"):
        train_booster(X, X[:, 0], BadHessian().fit(X[:, 0]), {}, 2)


def test_own_bins_match_xgboost_with_the_same_max_bin(chisq_small):
    """On small data (n below ~8 max_bin) XGBoost's sketch is exact, and our cut points are the same ones."""
    pytest.importorskip("xgboost")
    X, y = chisq_small
    X = X.astype(np.float32).astype(np.float64)
    p = {"max_depth": 2, "learning_rate": 0.3, "max_bin": 255}
    ours = qb.train(X, y, engine="native", objective="squared_error", params=p, num_boost_round=25)
    ref = qb.train(X, y, engine="xgboost", objective="squared_error", params={**p, "nthread": 1},
                   num_boost_round=25)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("refit", ["leaves", "step"])
def test_refit_with_row_sampling_and_monotone_bounds(small_quartiles, refit):
    ds = small_quartiles
    X, y = ds.X_train, ds.y_train
    o = obj("extended_qwk", y)
    p = {"max_depth": 3, "learning_rate": 0.5, "refit": refit, "subsample": 0.6,
         "monotone_constraints": [1, 1, 1, 1, 1]}
    b, *_ = train_booster(X, y, o, p, 15, seed=2)
    base, *_ = train_booster(X, y, obj("extended_qwk", y), {**p, "refit": "none"}, 1, seed=2)
    assert o.loss(y, b.predict(X)) < o.loss(y, base.predict(X))
    # raising every feature never lowers the score
    lo = b.predict(X[:200])
    hi = b.predict(np.minimum(X[:200] + 0.1, 1.0))
    assert np.all(hi >= lo - 1e-12)


@pytest.mark.parametrize("case", ["plain", "wide", "sampled", "one-hot", "lossguide", "min_child_weight",
                                  "tiny leaves"])
def test_fast_paths_grow_the_same_trees_as_the_general_code(monkeypatch, case):
    """The counts-based split search against the general search, on histograms from every build
    path (pairs, level batches, large-node blocks, via small thresholds): the same trees.
    (The histograms themselves are checked against brute force in test_histogram.py.)"""
    from qwkboost.native import grower, histogram

    rs = np.random.RandomState(11)
    n = {"wide": 3000, "tiny leaves": 400}.get(case, 6000)
    F = {"wide": 19, "one-hot": 3}.get(case, 6)
    X = rs.normal(size=(n, F))
    if case == "one-hot":
        X = np.hstack([X, np.eye(12)[rs.randint(0, 12, size=n)]])
    y = (X[:, :3] ** 2).sum(axis=1) + rs.normal(scale=0.3, size=n)
    p = {"max_depth": 5, "learning_rate": 0.3}
    p.update({"sampled": {"subsample": 0.7, "colsample_bytree": 0.6},
              "lossguide": {"grow_policy": "lossguide", "max_leaves": 20, "max_depth": 0},
              "min_child_weight": {"min_child_weight": 7.0, "reg_lambda": 3.0},
              "tiny leaves": {"max_depth": 9, "min_child_weight": 3.0}}.get(case, {}))
    # small thresholds so that pairs, level batches and large-node blocks all occur on this data
    monkeypatch.setattr(histogram, "PAIR_MIN_ROWS", 1500)
    monkeypatch.setattr(histogram, "LARGE_NODE_ROWS", 4000)
    monkeypatch.setattr(histogram, "BLOCK_ROWS", 1500)
    fit = lambda: train_booster(X, y, obj("squared_error", y), p, 15, seed=3)[0]
    fast = fit()
    from qwkboost.native import splitting
    monkeypatch.setattr(splitting, "exact_h_applies", lambda *a, **k: False)
    general = fit()
    for a, b in zip(fast.trees, general.trees):
        np.testing.assert_array_equal(a.feature, b.feature)
        np.testing.assert_array_equal(a.bin, b.bin)
        np.testing.assert_array_equal(a.value, b.value)
    assert len(fast.trees) == 15 and sum(t.n_leaves for t in fast.trees) > 15 * 8


@pytest.mark.parametrize("name", ["ordinal_logit", "multiclass"])
def test_any_hessian_search_grows_the_same_trees(monkeypatch, name):
    """With hessians that vary row by row, the fused G/H split search (best_splits_gh) grows the general
    search's trees, on histograms from the pair and level-batch paths."""
    from qwkboost.native import histogram, splitting

    rs = np.random.RandomState(4)
    X = rs.normal(size=(5000, 6))
    y = np.digitize(X[:, 0] + X[:, 1] ** 2 + rs.normal(scale=0.5, size=5000), [0.0, 1.0, 2.5]).astype(float)
    monkeypatch.setattr(histogram, "PAIR_MIN_ROWS", 1500)
    p = {"max_depth": 5, "learning_rate": 0.3, "min_child_weight": 2.0}
    fit = lambda: train_booster(X, y, obj(name, y), p, 8, seed=3)[0]      # noqa: E731
    fast = fit()
    monkeypatch.setattr(splitting, "gh_applies", lambda *a, **k: False)
    general = fit()
    assert len(fast.trees) == len(general.trees) and sum(t.n_leaves for t in fast.trees) > len(fast.trees) * 8
    for a, b in zip(fast.trees, general.trees):
        np.testing.assert_array_equal(a.feature, b.feature)
        np.testing.assert_array_equal(a.bin, b.bin)
        np.testing.assert_array_equal(a.value, b.value)


@pytest.mark.parametrize("name", ["squared_error", "multiclass"])
def test_eval_rows_scored_by_masks_as_by_traversal(monkeypatch, name):
    """Each round's trees score the eval rows through the bit-mask predictor: the eval metric of every round is
    the one a tree-by-tree traversal gives, bit for bit (categorical splits and missing values included)."""
    from qwkboost.native import boosting
    from qwkboost.native.predictor import predict_tree

    rs = np.random.RandomState(8)
    X = rs.normal(size=(3000, 5))
    X[rs.rand(3000) < 0.1, 1] = np.nan
    X[:, 4] = rs.randint(0, 30, size=3000)
    y = np.digitize(X[:, 0] + np.nan_to_num(X[:, 1]) + (X[:, 4] % 3) + rs.normal(scale=0.5, size=3000),
                    [0.0, 1.5, 3.0]).astype(float)
    p = {"max_depth": 4, "learning_rate": 0.3}
    fit = lambda: train_booster(X[:2400], y[:2400], obj(name, y), p, 12, eval_set=(X[2400:], y[2400:]),   # noqa: E731
                                categorical=[4], seed=1)
    masks = fit()

    class Traversal:
        def __init__(self, trees, *a, **k):
            self.trees = trees

        def predict_trees(self, codes):
            return np.stack([predict_tree(t, codes) for t in self.trees], axis=1)

    monkeypatch.setattr(boosting, "EnsemblePredictor", Traversal)
    traversed = fit()
    assert masks[3]["valid"] == traversed[3]["valid"] and len(next(iter(masks[3]["valid"].values()))) == 12
    assert any(t.cat_left is not None for t in masks[0].trees)
