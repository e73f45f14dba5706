"""Split search: XGBoost's gain and weights, StatQuest's worked example, missing values, limits."""

import numpy as np
import pytest

from qwkboost.native.binning import BinMapper, MISSING_BIN, N_CODES
from qwkboost.native.bundling import Layout
from qwkboost.native.grower import GrowerParams, grow_tree
from qwkboost.native.histogram import HistogramBuilder
from qwkboost.native.splitting import (FlatBins, SplitParams, find_best_splits, gain_table, leaf_weight,
                                       leaf_weight_scalar,
                                       score_given_weight, similarity, split_gain)

# StatQuest's XGBoost regression example: four rows, residuals from the mean 0.5, one unit of hessian per row
Y = np.array([-10.0, 7.0, 8.0, -7.0])
X = np.array([[10.0], [20.0], [25.0], [35.0]])
R = Y - Y.mean()                       # -10.5, 6.5, 7.5, -7.5


def hist_of(x_codes, g, h):
    """(1, 3, 1, 256) histogram of one feature."""
    out = np.zeros((1, 3, 1, N_CODES))
    np.add.at(out[0, 0, 0], x_codes, g)
    np.add.at(out[0, 1, 0], x_codes, h)
    np.add.at(out[0, 2, 0], x_codes, 1.0)
    return out


def flat(hist, n_bins, tot):
    """Column histograms (k, 3, F, 256) -> the flat bins the split search reads."""
    fb = FlatBins(np.asarray(n_bins))
    return fb.gather(hist, np.arange(hist.shape[2]), tot)[0], fb


def best(hist, tot, params, n_bins, **kw):
    """The one node's SplitInfo, or None."""
    f, fb = flat(hist, n_bins, tot)
    (split,) = find_best_splits(f, tot, params, fb, **kw)
    return split


def worked_example_gains(rows, lam=0.0):
    g = -R[rows]                        # squared error: g = F - y = -(residual)
    h = np.ones(len(rows))
    codes = np.arange(len(rows))        # x is already sorted: one bin per row
    hist = hist_of(codes, g, h)
    tot = np.array([[g.sum(), h.sum(), len(rows)]])
    p = SplitParams(reg_lambda=lam, min_child_weight=0.0)
    f, fb = flat(hist, [len(rows)], tot)
    gain, *_ = gain_table(f, tot, p, fb, missing=False)
    return gain[0, 0, : len(rows) - 1]


def test_worked_example_root_gains():
    # x < 15, x < 22.5, x < 30
    np.testing.assert_allclose(worked_example_gains([0, 1, 2, 3]), [120.33, 4.0, 56.33], atol=0.005)


def test_worked_example_second_level_gains():
    # under the right node (rows 2..4): x < 22.5 -> 28.17, x < 30 -> 140.17
    np.testing.assert_allclose(worked_example_gains([1, 2, 3]), [28.17, 140.17], atol=0.005)


def test_worked_example_similarity_scores_with_lambda_one():
    assert similarity(-10.5, 1, 1.0) == pytest.approx(55.125)
    assert similarity(6.5 + 7.5 - 7.5, 3, 1.0) == pytest.approx(10.5625)
    assert similarity(6.5 + 7.5, 2, 1.0) == pytest.approx(65.33, abs=0.005)
    assert similarity(-7.5, 1, 1.0) == pytest.approx(28.125)
    # and with lambda = 0, the example's numbers in brackets
    assert similarity(-10.5, 1, 0.0) == pytest.approx(110.25)
    assert similarity(6.5, 3, 0.0) == pytest.approx(14.08, abs=0.005)


def test_worked_example_split_gain_formula():
    assert split_gain(-10.5, 1, 6.5, 3, 0.0) == pytest.approx(120.33, abs=0.005)
    assert split_gain(14.0, 2, -7.5, 1, 0.0) == pytest.approx(140.17, abs=0.005)


def _grow_worked_example(gamma, prune="post"):
    bm = BinMapper().fit(X)
    codes = bm.transform(X)
    hb = HistogramBuilder(codes, n_jobs=1)
    hb.set_gradients(-R, np.ones(4))
    p = GrowerParams(SplitParams(reg_lambda=0.0, gamma=gamma, min_child_weight=0.0), max_depth=3, prune=prune)
    return grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p).tree


def test_worked_example_tree_and_gamma_pruning():
    t = _grow_worked_example(0.0)
    # root: x < 15 (gain 120.33); its right child: x < 30 (gain 140.17)
    assert t.threshold[0] == 20.0 and t.gain[0] == pytest.approx(120.33, abs=0.005)
    right = t.right[0]
    assert t.threshold[right] == 35.0 and t.gain[right] == pytest.approx(140.17, abs=0.005)
    # gamma = 130: 140.17 - 130 > 0 keeps the lower split, and with it the root
    t130 = _grow_worked_example(130.0)
    assert t130.n_leaves == 3 and t130.gain[t130.right[0]] == pytest.approx(140.17, abs=0.005)
    # gamma = 150: 140.17 - 150 < 0 prunes it; then the root (120.33 < 150) goes too
    t150 = _grow_worked_example(150.0)
    assert t150.n_leaves == 1
    assert t150.value[0] == pytest.approx(-(-R).sum() / 4)


def test_pre_pruning_refuses_the_weak_root_split():
    # XGBoost hist semantics: the root gain 120.33 < 130 stops growth at once
    assert _grow_worked_example(130.0, prune="pre").n_leaves == 1
    assert _grow_worked_example(100.0, prune="pre").n_leaves == 3


def test_leaf_weight_and_score_given_weight():
    assert leaf_weight(-14.0, 2.0, 1.0) == pytest.approx(14.0 / 3.0)
    assert leaf_weight(-14.0, 2.0, 1.0, upper=1.0) == 1.0
    # at the optimal weight, score_given_weight is the similarity
    w = leaf_weight(5.0, 3.0, 1.0)
    assert score_given_weight(5.0, 3.0, w, 1.0) == pytest.approx(similarity(5.0, 3.0, 1.0))
    # L1: soft threshold of G
    assert leaf_weight(-3.0, 1.0, 0.0, reg_alpha=1.0) == pytest.approx(2.0)
    assert similarity(0.5, 1.0, 0.0, reg_alpha=1.0) == 0.0


def test_missing_values_learn_their_direction():
    # rows with missing x behave like the low-x rows: they should go left
    rs = np.random.RandomState(0)
    x = rs.uniform(0, 1, 400)
    g = np.where(x < 0.5, -1.0, 1.0)
    x[:60] = np.nan
    g[:60] = -1.0
    bm = BinMapper().fit(x[:, None])
    codes = bm.transform(x[:, None])
    hist = hist_of(codes[0].astype(int), g, np.ones(400))
    tot = np.array([[g.sum(), 400.0, 400.0]])
    res = best(hist, tot, SplitParams(), bm.n_bins_, missing=True)
    assert res.default_left
    assert bm.edges_[0][res.bin] == pytest.approx(0.5, abs=0.01)
    # the other way round
    g[:60] = 1.0
    hist = hist_of(codes[0].astype(int), g, np.ones(400))
    tot = np.array([[g.sum(), 400.0, 400.0]])
    assert not best(hist, tot, SplitParams(), bm.n_bins_, missing=True).default_left


def test_missing_only_split_is_found():
    # all values alike, the missing rows different: the split is "value vs missing"
    x = np.r_[np.ones(50), np.full(50, np.nan)]
    x[:25] = 2.0
    g = np.r_[np.zeros(50), np.ones(50)]
    bm = BinMapper().fit(x[:, None])
    codes = bm.transform(x[:, None])[0].astype(int)
    hist = hist_of(codes, g, np.ones(100))
    res = best(hist, np.array([[50.0, 100.0, 100.0]]), SplitParams(), bm.n_bins_, missing=True)
    assert res is not None and np.isfinite(res.gain)
    assert res.bin == bm.n_bins_[0] - 1 and not res.default_left
    assert res.left[1] == 50 and res.right[1] == 50


@pytest.mark.parametrize("limit", ["min_child_weight", "min_samples_leaf"])
def test_child_size_limits(limit):
    x = np.arange(20.0)[:, None]
    g = np.where(np.arange(20) < 2, -10.0, 1.0)       # the best unconstrained split isolates 2 rows
    codes = BinMapper().fit_transform(x)[0].astype(int)
    h = np.ones(20)
    hist = hist_of(codes, g, h)
    tot = np.array([[g.sum(), 20.0, 20.0]])
    free = best(hist, tot, SplitParams(min_child_weight=0.0), [20], missing=False)
    assert free.bin == 1
    p = SplitParams(min_child_weight=5.0) if limit == "min_child_weight" else \
        SplitParams(min_child_weight=0.0, min_samples_leaf=5)
    res = best(hist, tot, p, [20], missing=False)
    assert res.left[1] >= 5 and res.right[1] >= 5
    assert res.bin == 4


def test_monotone_constraint_rejects_a_decreasing_split():
    x = np.arange(10.0)[:, None]
    g = np.where(np.arange(10) < 5, -1.0, 1.0)   # w_L > 0 > w_R: a decreasing step
    codes = BinMapper().fit_transform(x)[0].astype(int)
    hist = hist_of(codes, g, np.ones(10))
    tot = np.array([[0.0, 10.0, 10.0]])
    p = SplitParams(min_child_weight=0.0)
    assert best(hist, tot, p, [10], missing=False) is not None
    up = best(hist, tot, p, [10], monotone=np.array([1]), missing=False)
    assert up is None
    down = best(hist, tot, p, [10], monotone=np.array([-1]), missing=False)
    assert down is not None and np.isfinite(down.gain)


def test_feature_mask_and_invalid_thresholds():
    rs = np.random.RandomState(1)
    Xr = rs.normal(size=(300, 3))
    g = -Xr[:, 0] * 5 - Xr[:, 2]
    bm = BinMapper(max_bin=16).fit(Xr)
    codes = bm.transform(Xr)
    hb = HistogramBuilder(codes, n_jobs=1)
    hb.set_gradients(g, np.ones(300))
    hist = hb.build(None)[None]
    tot = np.array([[g.sum(), 300.0, 300.0]])
    assert best(hist, tot, SplitParams(), bm.n_bins_, missing=False).feature == 0
    mask = np.array([False, True, True])
    assert best(hist, tot, SplitParams(), bm.n_bins_, feature_mask=mask, missing=False).feature == 2
    f, fb = flat(hist, bm.n_bins_, tot)
    gain, *_ = gain_table(f, tot, SplitParams(), fb, missing=True)
    # a threshold at a feature's last bin only splits off missing rows: none here, so never valid;
    # nor is the missing slot itself a threshold
    last = fb.start[0] + bm.n_bins_[0] - 1
    assert np.all(np.isneginf(gain[0, :, last:last + 2]))
    assert hist[0, 0, :, MISSING_BIN].sum() == 0


def test_flat_bins_layout():
    fb = FlatBins(np.array([3, 1, 2]))
    np.testing.assert_array_equal(fb.start, [0, 4, 6])
    np.testing.assert_array_equal(fb.feat_of, [0, 0, 0, 0, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(fb.bin_of, [0, 1, 2, 3, 0, 1, 0, 1, 2])
    np.testing.assert_array_equal(fb.miss_pos, [3, 5, 8])


@pytest.mark.parametrize("params", [SplitParams(), SplitParams(reg_lambda=0.0, min_child_weight=0.0),
                                    SplitParams(reg_lambda=3.0, min_child_weight=37.5),
                                    SplitParams(reg_lambda=1.5e16), SplitParams(reg_lambda=0.3)])
@pytest.mark.parametrize("feature_mask", [None, np.array([True, False, True])])
def test_hess_scale_gives_the_same_splits(params, feature_mask):
    """The counts-based search (H = c * C, c a power of two) gives the general search's result, bit for bit."""
    rng = np.random.default_rng(5)
    fb = FlatBins(np.full(3, 255))
    k = 40
    # each node's rows binned on three features: every feature's counts add up to the node's
    G = np.zeros((k, 3, 256))
    C = np.zeros((k, 3, 256))
    for i in range(k):
        m = 2 if i == 0 else int(rng.integers(3, 400))          # node 0: too small to split
        g = rng.normal(size=m) * (1e9 if params.reg_lambda > 1e10 else 1.0)   # gains above MIN_GAIN
        for f in range(3):
            codes = rng.integers(0, 255, size=m) // (1 + 40 * (f == 2))   # feature 2: few bins used
            G[i, f] = np.bincount(codes, g, minlength=256)
            C[i, f] = np.bincount(codes, minlength=256)
    for c in (1.0, 2.0, 0.25):
        flat = np.stack([G, c * C, C], axis=1).reshape(k, 3, -1)
        tot = flat[:, :, :256].sum(axis=2)
        a = find_best_splits(flat, tot, params, fb, feature_mask, missing=False)
        b = find_best_splits(flat, tot, params, fb, feature_mask, missing=False, hess_scale=c)
        assert sum(s is not None for s in a) >= 5           # real splits are compared, not only "none"
        assert not any(s.exact_counts for s in a if s) and all(s.exact_counts for s in b if s)
        assert [s is None for s in a] == [s is None for s in b]
        for i, (sa, sb) in enumerate(zip(a, b)):
            if sa is None:
                continue
            for key in ("gain", "feature", "bin", "default_left"):
                assert getattr(sa, key) == getattr(sb, key), key
            for key in ("left", "right"):
                assert getattr(sa, key)[:2] == getattr(sb, key)[:2], key
                assert getattr(sb, key)[2] * c == getattr(sb, key)[1]      # exact counts: H = c C
            # the counts-based gain is split_gain's, bit for bit
            L, R = sb.left, sb.right
            assert sb.gain == float(split_gain(L[0], L[1], R[0], R[1], params.reg_lambda,
                                               G=tot[i, 0], H=tot[i, 1]))


@pytest.mark.parametrize("alpha", [0.0, 0.7])
def test_every_gain_path_is_split_gain(alpha):
    """gain_table's vectorised gains (and so find_best_splits') are split_gain's bit for bit, and the
    grower's scalar leaf weight is leaf_weight's."""
    rng = np.random.default_rng(2)
    k, F, nb = 4, 3, 9
    fb = FlatBins(np.full(F, nb))
    flat = np.zeros((k, 3, fb.size))
    C = rng.integers(0, 30, size=(k, F, nb + 1)).astype(float)
    C[:, :, -1] = 0                                           # no missing values
    C[:, 1:] = C[:, :1]                                       # every feature sees the node's rows
    G = rng.normal(size=(k, F, nb + 1)) * C
    H = rng.uniform(0.5, 2.0, size=(k, F, nb + 1)) * C
    H[:, 1:] = H[:, :1]
    G[:, 1:] = G[:, :1]
    flat[:, 0], flat[:, 1], flat[:, 2] = G.reshape(k, -1), H.reshape(k, -1), C.reshape(k, -1)
    tot = flat[:, :, : nb + 1].sum(axis=2)
    p = SplitParams(reg_lambda=1.3, reg_alpha=alpha, min_child_weight=0.0)
    gain, GL, HL, _ = gain_table(flat, tot, p, fb, missing=False)
    ok = np.isfinite(gain)
    assert ok.sum() > 20
    ref = split_gain(GL, HL, tot[:, None, None, 0] - GL, tot[:, None, None, 1] - HL, 1.3, alpha,
                     G=tot[:, None, None, 0], H=tot[:, None, None, 1])
    assert np.array_equal(gain[ok], ref[ok])
    # the scalar weight the grower uses, against the array one
    for Gs, Hs, lo, hi in zip(rng.normal(scale=5, size=200), rng.uniform(-3.0, 9, size=200),
                              rng.choice([-np.inf, -0.5], size=200), rng.choice([np.inf, 0.4], size=200)):
        assert leaf_weight_scalar(Gs, Hs, 1.3, alpha, lo, hi) == float(leaf_weight(Gs, Hs, 1.3, alpha, lo, hi))


@pytest.mark.parametrize("params", [SplitParams(), SplitParams(reg_lambda=3.0, min_child_weight=12.0),
                                    SplitParams(reg_lambda=1e-3, min_child_weight=1e-3),
                                    SplitParams(reg_lambda=0.3, min_child_weight=4.0)])
@pytest.mark.parametrize("feature_mask", [None, np.array([True, False, True])])
def test_any_hessian_search_gives_the_general_splits(params, feature_mask):
    """best_splits_gh (G and H as one complex cumsum, limits checked at the argmax) gives the general
    search's splits, gains bit for bit, with hessians that vary row by row."""
    from qwkboost.native.splitting import _best_splits_general, best_splits_gh, gh_applies

    rng = np.random.default_rng(7)
    fb = FlatBins(np.full(3, 255))
    k = 40
    G = np.zeros((k, 3, 256))
    H = np.zeros((k, 3, 256))
    C = np.zeros((k, 3, 256))
    for i in range(k):
        m = 2 if i == 0 else int(rng.integers(3, 400))
        g, h = rng.normal(size=m), rng.uniform(0.01, 0.3, size=m)      # a logistic-like hessian
        for f in range(3):
            codes = rng.integers(0, 255, size=m) // (1 + 40 * (f == 2))
            G[i, f] = np.bincount(codes, g, minlength=256)
            H[i, f] = np.bincount(codes, h, minlength=256)
            C[i, f] = np.bincount(codes, minlength=256)
    flat = np.stack([G, H, C], axis=1).reshape(k, 3, -1)
    tot = flat[:, :, :256].sum(axis=2)
    assert gh_applies(params, fb, missing=False)
    a = _best_splits_general(flat, tot, params, fb, feature_mask, None, None, None, False, None, None)
    b = best_splits_gh(flat, tot, params, fb, feature_mask)
    assert sum(s is not None for s in a) >= 5
    assert [s is None for s in a] == [s is None for s in b]
    for sa, sb in zip(a, b):
        if sa is not None:
            for key in ("gain", "feature", "bin", "default_left", "left", "right"):
                assert getattr(sa, key) == getattr(sb, key), key
    if params.min_child_weight > 1:
        # some nodes' unconstrained best split breaks the hessian limit: the search with them applied ran
        free = best_splits_gh(flat, tot, SplitParams(reg_lambda=params.reg_lambda, min_child_weight=0.0), fb,
                              feature_mask)
        assert any(f is not None and (s is None or (f.feature, f.bin) != (s.feature, s.bin))
                   for f, s in zip(free, b))
