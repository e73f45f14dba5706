"""Categorical columns with more levels than ``max_bin``: LightGBM's binning rule, 16-bit codes where they are
needed, LightGBM's category-set search, and everything around them (EFB, GOSS, the predictors, saved models),
checked against brute-force references and against the trees the engine grew before wide columns existed."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from qwkboost.native import NativeGBDTRegressor
from qwkboost.native.binning import MAX_BINS, MISSING_BIN, BinMapper, CodeMatrix
from qwkboost.native.boosting import NativeBooster, boost
from qwkboost.native.bundling import make_layout
from qwkboost.native.categorical import best_categorical_splits
from qwkboost.native.histogram import HistogramBuilder
from qwkboost.native.predictor import predict_tree
from qwkboost.native.splitting import FlatBins, SplitParams
from qwkboost.objectives import get as get_objective

from .golden_cases import CASES

DATA = Path(__file__).parent / "data"


def lightgbm_bins(col, max_bin, min_data_in_bin):
    """LightGBM's categorical binning loop, written out (bin.cpp), with the rarest rest in a bin of their own:
    ``{level: bin}`` and the number of value bins."""
    vals = col[~np.isnan(col)].astype(np.int64)
    levels, counts = np.unique(vals, return_counts=True)
    pairs = sorted(zip(counts.tolist(), levels.tolist()), key=lambda t: (-t[0], t[1]))
    cut = int(np.floor(0.99 * vals.size + 0.5))
    kept, used, cur = [], 0, 0
    while cur < len(pairs) and (used < cut or len(kept) + 1 < max_bin):
        if pairs[cur][0] < min_data_in_bin and cur > 1:
            break
        kept.append(pairs[cur][1])
        used += pairs[cur][0]
        cur += 1
    order = {lv: b for b, lv in enumerate(sorted(kept))}
    rest = [lv for _, lv in pairs[cur:]]
    for lv in rest:
        order[lv] = len(kept)
    return order, len(kept) + (1 if rest else 0)


def id_column(rs, n, levels, skew=1.0, sparse=True):
    ids = np.sort(rs.choice(20 * levels, levels, replace=False)) if sparse else np.arange(levels)
    w = np.exp(skew * rs.randn(levels))
    return ids[rs.choice(levels, n, p=w / w.sum())].astype(np.float64)


@pytest.mark.parametrize("levels, max_bin, min_data, skew", [(2500, 255, 3, 1.0), (900, 255, 3, 0.3), (400, 16, 3, 1.5),
                                                           (3000, 255, 1, 2.0), (300, 255, 10, 0.5)])
def test_wide_bins_follow_lightgbms_rule(levels, max_bin, min_data, skew):
    rs = np.random.RandomState(levels)
    col = id_column(rs, 40_000, levels, skew)
    col[rs.rand(col.size) < 0.02] = np.nan
    ref, n_bins = lightgbm_bins(col, max_bin, min_data)
    bm = BinMapper(max_bin=max_bin, min_data_in_bin=min_data).fit(col[:, None], categorical=[0])
    assert bm.n_bins_[0] == n_bins
    assert dict(zip(bm.cat_levels_[0].tolist(), bm.cat_bins_[0].tolist())) == ref
    codes = bm.transform(np.array([[lv] for lv in ref] + [[np.nan], [-1.0], [1e9], [col[~np.isnan(col)][0] + 0.5]]))
    got = codes[0]
    missing = bm.n_codes_[0] - 1
    assert got[: len(ref)].tolist() == list(ref.values())
    assert got[len(ref):].tolist() == [missing] * 4           # NaN, unseen, fractional: the missing code
    wide = n_bins > MAX_BINS
    assert isinstance(codes, CodeMatrix) == wide and got.dtype == (np.uint16 if wide else np.uint8)
    assert missing == (n_bins if wide else 255)


def test_few_codes_keep_todays_dense_bins_and_uint8():
    col = np.array([0, 3, 3, 7, np.nan, 2], dtype=float)
    bm = BinMapper(max_bin=255).fit(col[:, None], categorical=[0])
    # bin = code up to the largest code (8 bins); only the codes seen are levels, so 1 and 4..6 go to missing
    assert bm.cat_levels_[0].tolist() == bm.cat_bins_[0].tolist() == [0, 2, 3, 7] and bm.n_bins_[0] == 8
    assert bm.transform(np.array([[1.0], [2.0], [7.0]]))[0].tolist() == [MISSING_BIN, 2, 7]   # codes: (features, rows)
    assert bm.transform(col[:, None]).dtype == np.uint8


def test_only_wide_columns_get_16_bit_codes():
    rs = np.random.RandomState(0)
    X = np.column_stack([rs.randn(20_000), id_column(rs, 20_000, 2000), rs.randint(0, 30, 20_000)])
    bm = BinMapper().fit(X, categorical=[1, 2])
    codes = bm.transform(X)
    assert bm.wide == [1] and set(codes.wide) == {1}
    assert codes[0].dtype == np.uint8 and codes[2].dtype == np.uint8 and codes[1].dtype == np.uint16
    assert codes.n_codes.tolist() == [256, bm.n_bins_[1] + 1, 256]


def brute_histogram(codes, g, h, rows, width):
    out = np.zeros((3, width))
    for r in rows:
        out[0, codes[r]] += g[r]
        out[1, codes[r]] += h[r]
        out[2, codes[r]] += 1
    return out


def test_wide_histograms_equal_brute_force_on_every_path(monkeypatch):
    from qwkboost.native import histogram

    rs = np.random.RandomState(3)
    n = 6000
    narrow = rs.randint(0, 256, size=(3, n)).astype(np.uint8)
    wide = rs.randint(0, 700, size=n).astype(np.uint16)
    hb = HistogramBuilder(narrow, wide=[(wide, 701)])
    assert hb.vcols.tolist() == [1, 1, 1, 3]
    g, h = rs.randn(n), rs.rand(n)
    hb.set_gradients(g, h)
    rows = np.sort(rs.choice(n, 2500, replace=False))
    built = hb.build(rows)
    assert built.shape == (3, 6, 256)
    np.testing.assert_allclose(built[:, 3:].reshape(3, -1)[:, :701], brute_histogram(wide, g, h, rows, 701), atol=1e-9)
    np.testing.assert_array_equal(built[:, 3:].reshape(3, -1)[:, 701:], 0)
    np.testing.assert_allclose(built[:, 0], brute_histogram(narrow[0], g, h, rows, 256), atol=1e-9)
    # a subset of columns in another order, several nodes at once, in a pool task, in row blocks: the same sums
    assert np.array_equal(hb.build(rows, [3, 1])[:, :3], built[:, 3:]) and np.array_equal(hb.build(rows, [3, 1])[:, 3],
                                                                                          built[:, 1])
    other = np.sort(rs.choice(n, 900, replace=False))
    many = hb.build_many([rows, other])
    assert np.array_equal(many[0], built) and np.array_equal(many[1], hb.build(other))
    assert np.array_equal(hb.build(rows, in_pool=True), built)
    monkeypatch.setattr(histogram, "LARGE_NODE_ROWS", 1000)
    monkeypatch.setattr(histogram, "BLOCK_ROWS", 700)
    np.testing.assert_allclose(hb.build(rows), built, rtol=1e-12, atol=1e-12)
    hb.cache_root_counts()                                  # the root's counts, kept between rounds
    np.testing.assert_array_equal(hb.build(None)[2, 3:].reshape(-1)[:701], np.bincount(wide, minlength=701))


def lightgbm_categorical_split(G, H, C, Gt, Ht, Ct, p: SplitParams):
    """LightGBM's many-vs-many search for one node and feature, written out as its C++ loop; the missing slot is
    one more category. Returns ``(gain, sorted left set)`` or ``None``."""
    m = G.size
    sim = lambda g, h, lam: g * g / (h + lam)
    lam_c = p.reg_lambda + p.cat_l2
    used = [i for i in range(m) if C[i] >= p.cat_smooth and C[i] > 0]
    used.sort(key=lambda i: G[i] / (H[i] + p.cat_smooth))
    n_cat = min(p.max_cat_threshold, (len(used) + 1) // 2)
    best = None
    for direction in (1, -1):
        seq = used if direction == 1 else used[::-1]
        gl = hl = cl = group = 0.0
        for i in range(min(len(seq), n_cat)):
            t = seq[i]
            gl, hl, cl, group = gl + G[t], hl + H[t], cl + C[t], group + C[t]
            if cl < p.min_samples_leaf or hl < p.min_child_weight:
                continue
            cr, hr = Ct - cl, Ht - hl
            if cr < p.min_samples_leaf or cr < p.min_data_per_group or hr < p.min_child_weight:
                break
            if group < p.min_data_per_group:
                continue
            group = 0.0
            gain = sim(gl, hl, lam_c) + sim(Gt - gl, hr, lam_c) - sim(Gt, Ht, p.reg_lambda)
            if gain > 1e-6 and (best is None or gain > best[0]):
                best = (gain, sorted(seq[: i + 1]))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_category_set_search_equals_lightgbms_loop(seed):
    rs = np.random.RandomState(seed)
    m = 400 + 100 * seed                                    # value bins, then the missing slot
    k = 5
    C = rs.poisson(rs.choice([3.0, 12.0, 40.0], size=(k, m + 1)))
    G = rs.randn(k, m + 1) * C + rs.randn(k, 1) * C
    H = C * rs.uniform(0.5, 1.5, size=(k, 1))
    flat = np.stack([G, H, C.astype(float)], axis=1)
    totals = flat.sum(axis=2)
    fb = FlatBins(np.array([m]), categorical=[0])
    p = SplitParams(min_data_per_group=[100, 20, 50, 1, 100, 200][seed], max_cat_threshold=[32, 8, 64, 32, 4, 32][seed])
    got = best_categorical_splits(flat, totals, p, fb)
    for i in range(k):
        ref = lightgbm_categorical_split(G[i], H[i], C[i], *totals[i], p)
        if ref is None:
            assert got[i] is None
            continue
        sp = got[i]
        left = sorted(sp.cat_left.tolist() + ([m] if sp.default_left else []))
        assert sp.gain == pytest.approx(ref[0], rel=1e-12) and left == ref[1]
        assert sp.left[2] == C[i, ref[1]].sum() and sp.exact_counts


def test_few_categories_split_one_against_the_rest():
    C = np.array([[50.0, 60, 40, 0]])                       # three categories and the missing slot
    G = np.array([[-50.0, 30, 20, 0]])
    flat = np.stack([G, C, C], axis=1)
    sp = best_categorical_splits(flat, flat.sum(axis=2), SplitParams(), FlatBins(np.array([3]), categorical=[0]))[0]
    assert sp.cat_left.tolist() == [0] and not sp.default_left


def test_data_without_wide_categoricals_grows_the_trees_it_grew_before():
    """Trees the engine grew before wide columns (format 2 code, ``golden_cases.py``): the same structure, and the
    same values (bit for bit on the machine that made them; elsewhere to 1e-12 of the tree's largest value: a
    value near 0 that is the difference of larger sums can move by an ulp of them, as a leaf of 4.112535788866352e-05
    against the file's 4.112535788870898e-05 did on another machine, 1.1e-12 relative)."""
    ref = json.loads((DATA / "reference_trees.json").read_text())
    for name, (X, y, objective, params, rounds) in CASES().items():
        m = qb.train(X, y, engine="native", objective=objective, params=params, num_boost_round=rounds, seed=3)
        got = [t.to_dict() for t in m.booster.trees]
        assert len(got) == len(ref[name]), name
        for a, b in zip(got, ref[name]):
            for key in ("feature", "bin", "default_left", "left", "right", "count"):
                assert a[key] == b[key], (name, key)
            for key in ("value", "gain", "hess"):      # 1e-12 of the tree's scale: a value near 0 may differ by ulps
                scale = float(np.max(np.abs(b[key]), initial=0.0))
                np.testing.assert_allclose(a[key], b[key], rtol=1e-12, atol=1e-12 * scale, err_msg=f"{name} {key}")


@pytest.fixture(scope="module")
def ids():
    from qwkboost.data.synthetic import id_frames

    train, test = id_frames(n_train=12_000, n_test=4_000, levels=(1500, 400), seed=2)
    X, Xt = train.drop(columns=["id", "label"]), test.drop(columns=["id", "label"])
    return X, train["label"].to_numpy(), Xt, test["label"].to_numpy()


def test_wide_categoricals_train_predict_save_and_load(ids, tmp_path):
    X, y, Xt, yt = ids
    m = qb.train(X, y, engine="native", objective="squared_error", params={"learning_rate": 0.2, "max_depth": 4},
                 num_boost_round=40, categorical=["id_1", "id_2"])
    b = m.booster
    assert b.bin_mapper.wide == [0, 1] and b.bin_mapper.n_bins_[0] > 1000 and b.bin_mapper.n_codes_[2] == 256
    assert any(t.cat_left is not None and any(c is not None and c.size and c.max() > 255 for c in t.cat_left)
               for t in b.trees)
    codes = b.bin_mapper.transform(m.schema.encode(Xt))
    np.testing.assert_allclose(b.predict_margin(m.schema.encode(Xt)), sum(predict_tree(t, codes) for t in b.trees),
                               rtol=0, atol=1e-12)                  # bit masks and traversal agree
    back = qb.load_model(m.save(tmp_path / "m.json"))
    np.testing.assert_array_equal(back.predict(Xt), m.predict(Xt))
    again = NativeBooster.from_json(b.to_json())
    np.testing.assert_array_equal(again.predict(m.schema.encode(Xt)), b.predict(m.schema.encode(Xt)))
    for j in (0, 1):
        assert np.array_equal(again.bin_mapper.cat_levels_[j], b.bin_mapper.cat_levels_[j])
        assert np.array_equal(again.bin_mapper.cat_bins_[j], b.bin_mapper.cat_bins_[j])
    sparse = BinMapper().fit(X.to_numpy(dtype=float), categorical=[0, 1])     # the raw ids: sparse levels
    d = sparse.to_dict()
    assert set(d["categorical_levels"]) == {"0", "1"}
    assert np.array_equal(BinMapper.from_dict(d).transform(Xt.to_numpy(dtype=float))[0],
                          sparse.transform(Xt.to_numpy(dtype=float))[0])
    # an id training never had, or none at all, is a missing value
    np.testing.assert_array_equal(m.predict(Xt.assign(id_1=-5)), m.predict(Xt.assign(id_1=np.nan)))
    plain = qb.train(X, y, engine="native", objective="squared_error", params={"learning_rate": 0.2, "max_depth": 4},
                     num_boost_round=40)
    assert qb.qwk(yt, np.clip(np.round(m.predict(Xt)), 1, 4)) > qb.qwk(yt, np.clip(np.round(plain.predict(Xt)), 1, 4))


def test_efb_goss_and_monotone_refusal_with_a_wide_column(ids):
    X, y, _, _ = ids
    Xa = X.to_numpy(dtype=float)
    rs = np.random.RandomState(0)
    onehot = np.zeros((Xa.shape[0], 6))
    onehot[np.arange(Xa.shape[0]), rs.randint(0, 6, Xa.shape[0])] = 1
    Xe = np.hstack([Xa, onehot])
    obj = get_objective("squared_error")
    obj.fit(y)
    fit = lambda p, X=Xe: boost(X, y, obj, {"learning_rate": 0.3, "max_depth": 3, **p}, 8, None, [], 1,
                                categorical=[0, 1])[0]
    bundled, plain = fit({}), fit({"enable_bundle": False})
    codes = BinMapper().fit(Xe, [0, 1]).transform(Xe)
    assert make_layout(codes).n_columns < Xe.shape[1]              # the one-hot columns are bundled, the id is not
    np.testing.assert_array_equal(bundled.predict(Xe), plain.predict(Xe))
    goss = lambda: fit({"sampling_method": "goss", "learning_rate": 0.5})
    np.testing.assert_array_equal(goss().predict(Xe), goss().predict(Xe))
    with pytest.raises(ValueError, match=r"monotone_constraints: features \[0\] are categorical"):
        fit({"monotone_constraints": [1] + [0] * (Xe.shape[1] - 1)})


def test_old_model_files_still_load():
    """A format-2 model (written before wide columns) with a categorical column of more codes than max_bin, whose
    rare codes shared the last bin, predicts what it predicted."""
    saved = json.loads((DATA / "format2_categorical_model.json").read_text())
    b = NativeBooster.from_dict(saved["model"])
    np.testing.assert_array_equal(b.predict(np.array(saved["X"], dtype=float)), saved["predictions"])


def test_the_scikit_learn_estimator_takes_wide_categoricals_by_name(ids):
    X, y, Xt, _ = ids
    est = NativeGBDTRegressor(n_estimators=20, max_depth=3, learning_rate=0.3,
                              categorical_features=["id_1", "id_2"]).fit(X, y)
    assert est.booster_.bin_mapper.wide == [0, 1]
    as_numbers = NativeGBDTRegressor(n_estimators=20, max_depth=3, learning_rate=0.3).fit(X, y)
    assert not np.array_equal(est.predict(Xt), as_numbers.predict(Xt))
    with pytest.raises(ValueError, match="'nope' is not a column name"):
        NativeGBDTRegressor(categorical_features=["nope"]).fit(X, y)


@pytest.mark.parametrize("value", [-1.0, 2.5, 2.0 ** 31])
def test_bad_category_codes_are_refused_naming_the_column(value):
    X = pd.DataFrame({"x": np.arange(300.0), "store": np.arange(300.0) % 7})
    X.loc[5, "store"] = value
    with pytest.raises(ValueError, match=r"categorical feature 'store' \(column 1\) must hold category codes, whole "
                                         rf"numbers in \[0, 2147483647\] \(NaN missing\); got {value!r}"):
        NativeGBDTRegressor(n_estimators=2, categorical_features=["store"]).fit(X, np.arange(300.0))
    with pytest.raises(ValueError, match="categorical feature 1 must hold category codes"):
        BinMapper().fit(np.array([[0.0, 1.0], [1.0, np.inf]]), categorical=[1])


def test_more_levels_than_16_bits_can_code_are_refused():
    col = np.arange(70_000, dtype=float)[:, None]
    with pytest.raises(ValueError, match=r"categorical feature 'user' \(column 0\) has 69,300 levels .* more than "
                                         r"the 65,535 bins"):
        BinMapper(min_data_in_bin=1).fit(col, categorical=[0], names=["user"])
    assert BinMapper().fit(col, categorical=[0]).n_bins_[0] == 3   # levels of one row each share the rare bin


@pytest.mark.parametrize("name, value", [("max_cat_threshold", 0), ("max_cat_to_onehot", 0.5),
                                         ("min_data_per_group", -1), ("cat_l2", -1.0), ("min_data_in_bin", 0)])
def test_bad_categorical_parameters_are_refused(name, value):
    X = np.column_stack([np.arange(100.0), np.arange(100.0) % 5])
    with pytest.raises(ValueError, match=name):
        qb.train(X, np.arange(100.0) % 4, engine="native", objective="squared_error", params={name: value},
                 num_boost_round=2, categorical=[1])


def test_the_qwk_classifier_takes_wide_categoricals(ids):
    X, y, Xt, yt = ids
    fit = lambda cat: qb.QWKClassifier(engine="native", params={"learning_rate": 0.3, "max_depth": 4},
                                       num_boost_round=60, early_stopping_rounds=10, n_splits=3,
                                       categorical=cat).fit(X, y)
    clf = fit(["id_1", "id_2"])
    assert clf.score(Xt, yt) > fit(None).score(Xt, yt) + 0.05
    assert all(m.booster.bin_mapper.wide == [0, 1] for m in clf.pipeline_.models)


def test_category_order_breaks_ties_by_bin():
    """The S first categories along G/(H + cat_smooth) with many equal keys (categories of equal sums): ties by
    bin, reversed for the descending order, as a full lexicographic sort gives them, on any CPU."""
    from qwkboost.native.categorical import _first

    rng = np.random.default_rng(0)
    for _ in range(200):
        k, m = int(rng.integers(1, 6)), int(rng.integers(2, 60))
        S = int(rng.integers(1, m + 1))
        key = rng.choice([0.1, 0.2, 0.3, np.inf, -1.0, np.nan], size=(k, m))
        for reverse in (False, True):
            got = _first(key, S, reverse)
            filled, idx = np.where(np.isnan(key), np.inf, key), np.arange(m)
            for r in range(k):
                np.testing.assert_array_equal(got[r], np.lexsort((-idx if reverse else idx, filled[r]))[:S])


def test_a_code_training_never_had_goes_where_missing_values_go():
    """Codes 0, 1 and 3 in training (and NaN): an unseen 2, inside the codes' range, is routed as the unseen 9,
    a fractional code and NaN are, not as a category of its own."""
    rs = np.random.RandomState(0)
    x = rs.choice([0.0, 1.0, 3.0, np.nan], size=600)
    y = np.where(np.isnan(x), -5.0, np.where(x == 3, 1.0, 2.0)) + rs.normal(0, 0.1, x.size)
    m = NativeGBDTRegressor(n_estimators=5, categorical_features=[0], min_data_per_group=1, cat_smooth=1).fit(
        x[:, None], y)
    unseen = m.predict(np.array([[2.0], [9.0], [2.5], [np.nan]]))
    assert np.all(unseen == unseen[-1])


def test_monotone_constraints_are_refused_on_a_bin_mappers_categorical_feature():
    X = np.column_stack([np.random.RandomState(0).randint(0, 6, 300), np.random.RandomState(1).rand(300)])
    y = X[:, 0] % 3 + X[:, 1]
    bm = BinMapper().fit(X, [0])
    from qwkboost.native.boosting import train_booster

    with pytest.raises(ValueError, match=r"monotone_constraints: features \[0\] are categorical"):
        train_booster(X, y, get_objective("squared_error").fit(y), {"monotone_constraints": [1, 0]}, 3, bin_mapper=bm)
    with pytest.raises(ValueError, match=r"categorical=\[1\] disagrees with bin_mapper's categorical features \[0\]"):
        train_booster(X, y, get_objective("squared_error").fit(y), {}, 3, bin_mapper=bm, categorical=[1])


@pytest.mark.parametrize("cat_l2", [0.0, 10.0])
def test_the_children_of_a_category_set_split_take_cat_l2(cat_l2):
    """LightGBM computes the outputs of a many-vs-many categorical split with lambda_l2 + cat_l2, as it scores it."""
    from qwkboost.native.boosting import train_booster

    rs = np.random.RandomState(0)
    x = rs.randint(0, 8, 800).astype(float)              # 8 categories > max_cat_to_onehot: the set search
    y = (x % 4) + rs.normal(0, 0.3, 800)
    obj = get_objective("squared_error").fit(y)
    fit = train_booster(x[:, None], y, obj, {"max_depth": 1, "learning_rate": 1.0, "reg_lambda": 1.0,
                                             "cat_l2": cat_l2, "min_data_per_group": 1, "cat_smooth": 1.0},
                        1, categorical=[0])
    booster = fit[0] if isinstance(fit, tuple) else fit
    assert booster.trees[0].to_dict()["feature"][0] == 0
    f0 = obj.init_score(y)
    g, h = obj.grad_hess(y, np.full(y.size, f0))
    pred = booster.predict(x[:, None])
    leaves = np.unique(pred)
    assert leaves.size == 2
    for v in leaves:
        rows = pred == v
        assert v - f0 == pytest.approx(-g[rows].sum() / (h[rows].sum() + 1.0 + cat_l2), rel=1e-12)


def test_max_cat_to_onehot_counts_categories_not_the_largest_code():
    """Two categories coded 0 and 1, or 0 and 7: the same one-against-the-rest split (8 value bins, 2 categories)."""
    rs = np.random.RandomState(0)
    a = rs.randint(0, 2, 150).astype(float)
    y = a * 2.0 + rs.normal(0, 0.1, 150)
    trees = []
    for codes in (a, a * 7):
        m = NativeGBDTRegressor(n_estimators=1, max_depth=1, categorical_features=[0]).fit(codes[:, None], y)
        trees.append(m.predict(codes[:, None]))
    assert np.unique(trees[0]).size == 2
    np.testing.assert_array_equal(trees[0], trees[1])
