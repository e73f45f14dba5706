"""EFB: greedy bundles of exclusive features, exact histograms back, same trees as without it."""

import numpy as np

import qwkboost as qb
from qwkboost.native.binning import BinMapper
from qwkboost.native.bundling import Layout, find_bundles, make_layout
from qwkboost.native.histogram import HistogramBuilder
from qwkboost.native.splitting import FlatBins


def one_hot_data(n=2000, levels=(12, 9, 30), dense=2, seed=0):
    rs = np.random.RandomState(seed)
    cols, effect = [], np.zeros(n)
    for k in levels:
        cat = rs.randint(0, k, n)
        oh = np.eye(k)[cat]
        cols.append(oh)
        effect += rs.normal(size=k)[cat]
    D = rs.normal(size=(n, dense))
    X = np.hstack(cols + [D])
    y = effect + D[:, 0] + rs.normal(scale=0.1, size=n)
    return X, y


def test_one_hot_groups_are_bundled():
    X, _ = one_hot_data()
    codes = BinMapper().fit_transform(X)
    bundles, defaults = find_bundles(codes)
    assert np.all(defaults[:51] == 0)                 # the zero bin is the default of one-hot columns
    multi = [b for b in bundles if len(b) > 1]
    assert multi and sum(len(b) for b in bundles) == X.shape[1]
    # every bundle is conflict-free: at most one non-default feature per row
    for b in multi:
        assert (codes[b] != defaults[b][:, None]).sum(axis=0).max() <= 1
    assert len(bundles) < X.shape[1] / 4
    # dense features stay alone
    assert [X.shape[1] - 2] in bundles and [X.shape[1] - 1] in bundles


def test_expand_recovers_feature_histograms_exactly():
    X, y = one_hot_data(n=800)
    codes = BinMapper().fit_transform(X)
    lay = make_layout(codes)
    assert not lay.identity and lay.n_columns < codes.shape[0]
    g = np.random.RandomState(1).normal(size=800)
    rows = np.arange(0, 800, 3)
    plain = HistogramBuilder(codes, n_jobs=1)
    plain.set_gradients(g, np.ones(800))
    want = plain.build(rows)
    hb = HistogramBuilder(lay.codes, n_jobs=1)
    hb.set_gradients(g, np.ones(800))
    cols = lay.columns_for(None)
    bm = BinMapper().fit(X)
    fb_plain, fb_efb = FlatBins(bm.n_bins_), FlatBins(bm.n_bins_, lay)
    totals = want[:, 0].sum(axis=1)[None]
    ref, _ = fb_plain.gather(want[None], np.arange(codes.shape[0]), totals)
    got, built = fb_efb.gather(hb.build(rows, cols)[None], cols, totals)
    assert built.all()
    np.testing.assert_allclose(got, ref, atol=1e-9)
    for f in range(codes.shape[0]):
        np.testing.assert_array_equal(lay.feature_codes(f, rows), codes[f, rows])


def test_bundled_training_grows_the_same_trees():
    X, y = one_hot_data()
    p = {"max_depth": 4, "learning_rate": 0.2, "colsample_bytree": 0.7}
    a = qb.train(X, y, engine="native", objective="squared_error", params={**p, "enable_bundle": True},
                 num_boost_round=15, seed=3)
    b = qb.train(X, y, engine="native", objective="squared_error", params={**p, "enable_bundle": False},
                 num_boost_round=15, seed=3)
    for ta, tb in zip(a.booster.trees, b.booster.trees):
        # equal gains node by node (an exact tie may be broken on another feature with the same rows)
        np.testing.assert_allclose(ta.gain, tb.gain, rtol=1e-9)
        np.testing.assert_allclose(np.sort(ta.value), np.sort(tb.value), atol=1e-10)
        assert (ta.feature == tb.feature).mean() > 0.9
    np.testing.assert_allclose(a.predict(X), b.predict(X), atol=1e-9)


def test_conflicts_allowed_still_train():
    X, y = one_hot_data(levels=(5, 5))
    X[:50, 0] = X[:50, 5] = 1.0          # rows where two one-hot groups' columns collide
    m = qb.train(X, y, engine="native", objective="squared_error",
                 params={"max_conflict_rate": 0.05, "max_depth": 3}, num_boost_round=10)
    assert np.isfinite(m.predict(X)).all()


def test_dense_data_keeps_the_identity_layout():
    X = np.random.RandomState(0).normal(size=(500, 4))
    lay = make_layout(BinMapper().fit_transform(X))
    assert lay.identity and isinstance(lay, Layout)


def test_bundles_with_missing_values_column_sampling_and_counts():
    X, y = one_hot_data(n=1500, levels=(6, 8))
    rs = np.random.RandomState(5)
    # two exclusive sparse features, one with missing values: 0 mostly, else NaN / 1 / 2
    u = rs.rand(len(X))
    extra = np.where(u < 0.05, np.nan, np.where(u < 0.08, 1.0, 0.0))
    other = np.where((u > 0.5) & (u < 0.6), 2.0, 0.0)
    X = np.c_[X, other, extra]
    y = y + np.where(np.isnan(extra), 2.0, 0.0) + other
    p = {"max_depth": 4, "colsample_bytree": 0.8, "min_samples_leaf": 5, "learning_rate": 0.3}
    fit = lambda eb: qb.train(X, y, engine="native", objective="squared_error",
                              params={**p, "enable_bundle": eb}, num_boost_round=12, seed=4)
    a, b = fit(True), fit(False)
    lay = make_layout(BinMapper().fit_transform(X))
    assert any(X.shape[1] - 1 in bundle and len(bundle) > 1 for bundle in lay.bundles)
    for ta, tb in zip(a.booster.trees, b.booster.trees):
        np.testing.assert_allclose(ta.gain, tb.gain, rtol=1e-9)
        assert ta.count.min() >= 5
    np.testing.assert_allclose(a.predict(X), b.predict(X), atol=1e-9)
    nan_rows = np.isnan(extra)
    assert abs(np.mean(a.predict(X)[nan_rows] - y[nan_rows])) < 0.5
