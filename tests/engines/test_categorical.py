"""Categorical features on every engine: category-set splits, unseen categories, saved models."""

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from qwkboost.evaluation.metrics import rmse

ENGINES = ["xgboost", "lightgbm", "native", "catboost"]
#: The engines that split on category sets (CatBoost encodes categories by their target statistics instead:
#: tests/engines/test_catboost.py).
SET_ENGINES = ["xgboost", "lightgbm", "native"]


@pytest.fixture(scope="module")
def shuffled_effects():
    """A 40-category column whose effect does not follow the codes: a threshold on the code cannot
    isolate it, a category set can."""
    rs = np.random.RandomState(0)
    n = 6000
    cats = [f"c{i:02d}" for i in range(40)]
    effect = dict(zip(cats, rs.normal(scale=2.0, size=40)))
    city = rs.choice(cats, n)
    x = rs.rand(n)
    y = np.array([effect[c] for c in city]) + x + rs.normal(scale=0.3, size=n)
    df = pd.DataFrame({"x": x, "city": city})
    return df.iloc[:4500], y[:4500], df.iloc[4500:], y[4500:]


@pytest.mark.parametrize("engine", SET_ENGINES)
def test_category_sets_beat_codes_as_numbers(engine, shuffled_effects):
    X, y, Xt, yt = shuffled_effects
    p = {"max_depth": 2, "learning_rate": 0.3}
    m = qb.train(X, y, engine, "squared_error", p, num_boost_round=30)
    codes = m.schema.encode(X)
    as_numbers = qb.train(codes, y, engine, "squared_error", p, num_boost_round=30)
    assert m.schema.categorical == [1]
    e_cat, e_num = rmse(yt, m.predict(Xt)), rmse(yt, as_numbers.predict(m.schema.encode(Xt)))
    assert e_cat < 0.36 and e_cat < 0.8 * e_num, (e_cat, e_num)     # the noise alone is 0.3


@pytest.mark.parametrize("engine", ENGINES)
def test_unseen_categories_reordered_columns_and_saved_models(engine, shuffled_effects, tmp_path):
    X, y, Xt, _ = shuffled_effects
    m = qb.train(X, y, engine, "squared_error", {"max_depth": 3}, num_boost_round=20)
    expected = m.predict(Xt)
    np.testing.assert_array_equal(m.predict(Xt[["city", "x"]]), expected)
    unseen = Xt.assign(city="never seen")
    missing = Xt.assign(city=None)
    np.testing.assert_array_equal(m.predict(unseen), m.predict(missing))     # an unseen category is missing
    back = qb.load_model(m.save(tmp_path / "m.json"))
    assert back.schema == m.schema
    np.testing.assert_array_equal(back.predict(Xt), expected)
    np.testing.assert_array_equal(back.predict(unseen), m.predict(unseen))


def test_engines_receive_the_columns_as_categorical(shuffled_effects):
    X, y, _, _ = shuffled_effects
    xg = qb.train(X, y, "xgboost", "squared_error", {"max_depth": 2}, num_boost_round=3)
    assert xg.booster.feature_types == ["q", "c"]
    lg = qb.train(X, y, "lightgbm", "squared_error", {"max_depth": 2}, num_boost_round=3)
    assert any(t.get("decision_type") == "==" for t in _lgb_nodes(lg.booster.dump_model()))
    nat = qb.train(X, y, "native", "squared_error", {"max_depth": 2}, num_boost_round=3)
    assert any(c is not None for t in nat.booster.trees for c in (t.cat_left or []))


def _lgb_nodes(dump):
    stack = [t["tree_structure"] for t in dump["tree_info"]]
    while stack:
        n = stack.pop()
        if "split_index" in n:
            yield n
            stack += [n["left_child"], n["right_child"]]


def test_native_categorical_prediction_paths_agree(shuffled_effects):
    """The bit-mask predictor and the row-pushing traversal give the same scores on categorical trees,
    and monotone constraints on a categorical feature are refused."""
    from qwkboost.native.predictor import predict_tree

    X, y, Xt, _ = shuffled_effects
    m = qb.train(X, y, "native", "squared_error", {"max_depth": 4}, num_boost_round=30)
    b = m.booster
    codes = b.bin_mapper.transform(m.schema.encode(Xt))
    total = sum(predict_tree(t, codes) for t in b.trees)
    np.testing.assert_allclose(b.predict_margin(m.schema.encode(Xt)), total, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"monotone_constraints: features \[1\] are categorical"):
        qb.train(X, y, "native", "squared_error", {"monotone_constraints": [1, 1]}, num_boost_round=2)


def test_native_max_bin_is_a_floor_for_categories():
    """More codes than max_bin: the levels covering 99 % of the rows keep bins of their own (LightGBM's rule,
    checked against its loop in tests/native/test_wide_categorical.py), the rarest share one."""
    from qwkboost.native.binning import BinMapper

    codes = np.concatenate([np.repeat(np.arange(300.0), 20), np.full(2000, 7.0), 1000 + np.arange(10.0)])
    bm = BinMapper(max_bin=16).fit(codes[:, None], categorical=[0])
    levels, bins = bm.cat_levels_[0], bm.cat_bins_[0]
    n = int(bm.n_bins_[0])
    assert n > 255 and bm.wide == [0]                        # more than a byte holds: 16-bit codes
    own = bins < n - 1
    assert np.isin(codes, levels[own]).mean() >= 0.99        # the levels with bins of their own cover 99 %
    assert np.all(bins[levels >= 1000] == n - 1)             # codes of one row share the rare bin
    out = bm.transform(np.array([[7.0], [np.nan], [999.0], [1003.0]]))[0]
    assert out[0] < n - 1 and out[1] == n and out[2] == n and out[3] == n - 1   # unseen -> missing; rare -> shared


@pytest.mark.parametrize("engine", ENGINES)
def test_a_categorical_column_keeps_its_identity_at_predict_and_explain_time(engine, shuffled_effects, tmp_path):
    """The same column as strings, as a pandas Categorical whose categories run in another order (with one more
    than training had), or read back from a saved model, gives the same scores; as integer codes (its own
    Categorical's codes, or qwkboost's) it is refused naming the column: the codes used to be taken as unseen
    categories, and the scores moved with no word. Numeric categories given as text are read as numbers."""
    X, y, Xt, _ = shuffled_effects
    X, y, Xt = X.iloc[:1500], y[:1500], Xt.iloc[:300]
    m = qb.train(X, y, engine, "squared_error", {"learning_rate": 0.3}, num_boost_round=15)
    base = m.predict(Xt)
    base_shap = qb.explain(m, Xt, max_rows=None).values
    cats = sorted(set(Xt["city"])) + ["new"]
    other = Xt.assign(city=pd.Categorical(Xt["city"], categories=cats[::-1]))
    np.testing.assert_array_equal(m.predict(other), base)
    np.testing.assert_allclose(qb.explain(m, other, max_rows=None).values, base_shap)
    np.testing.assert_array_equal(qb.load_model(m.save(tmp_path / "m.json")).predict(other), base)
    for codes in (other["city"].cat.codes.astype(np.int64), m.schema.encode(Xt)[:, 1].astype(np.int64),
                  pd.Series(other["city"].cat.codes, dtype=float)):
        as_codes = Xt.assign(city=np.asarray(codes))
        for call in (lambda: m.predict(as_codes), lambda: qb.explain(m, as_codes, max_rows=None)):
            with pytest.raises(ValueError, match=r"^feature 'city' has text categories \('c00', 'c01', .*\(40 in "
                                                 r"all\)\), but row 0 of X holds the number [\d.]+, which is none of "
                                                 r"them: integer codes are not read as categories"):
                call()
    # numeric categories (categorical=[...] on numbers) given as their text: the same categories
    num = X.assign(city=X["city"].str[1:].astype(int))
    mn = qb.train(num, y, engine, "squared_error", {"learning_rate": 0.3}, num_boost_round=5, categorical=["city"])
    as_text = Xt.assign(city=Xt["city"].str[1:].astype(int).astype(str))
    np.testing.assert_array_equal(mn.predict(as_text), mn.predict(Xt.assign(city=Xt["city"].str[1:].astype(int))))
    with pytest.raises(ValueError, match=r"^feature 'city' has numeric categories \(0, 1, .*\), but row 0 of X holds "
                                         r"'c\d\d', which is not a number"):
        mn.predict(Xt)
