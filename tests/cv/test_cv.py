import numpy as np
import pytest

from qwkboost.cv.crossval import cross_validate


def test_oof_covers_every_row_once_and_test_is_fold_mean(small_quartiles):
    ds = small_quartiles
    cv = cross_validate(ds.X_train, ds.y_train, ds.X_test, engine="xgboost", objective="squared_error",
                        params={"max_depth": 3}, num_boost_round=30, early_stopping_rounds=5, n_splits=4)
    valid = np.concatenate([va for _, va in cv.folds])
    assert np.array_equal(np.sort(valid), np.arange(len(ds.y_train)))
    for m, (_, va) in zip(cv.models, cv.folds):
        np.testing.assert_allclose(cv.oof[va], m.predict(ds.X_train[va]))
    np.testing.assert_allclose(cv.test, np.mean([m.predict(ds.X_test) for m in cv.models], axis=0))
    assert len(cv.best_iterations) == 4 and cv.fit_seconds > 0 and cv.predict_seconds > 0


def test_folds_are_stratified_and_reproducible(small_quartiles):
    ds = small_quartiles
    kw = dict(engine="lightgbm", objective="extended_qwk", params={"verbose": -1}, num_boost_round=5,
              early_stopping_rounds=None, n_splits=5, seed=3)
    a = cross_validate(ds.X_train, ds.y_train, None, **kw)
    b = cross_validate(ds.X_train, ds.y_train, None, **kw)
    np.testing.assert_array_equal(a.oof, b.oof)
    for _, va in a.folds:
        counts = np.bincount(ds.y_train[va].astype(int))
        assert counts.max() - counts.min() <= 1


def test_curves_average_folds(small_quartiles):
    ds = small_quartiles
    cv = cross_validate(ds.X_train, ds.y_train, None, engine="xgboost", objective="extended_qwk",
                        num_boost_round=8, early_stopping_rounds=None, n_splits=3)
    curves = cv.curves()
    assert set(curves) == {"train_kappa", "valid_kappa"}
    np.testing.assert_allclose(curves["valid_kappa"],
                               np.mean([m.learning_curve["valid"] for m in cv.models], axis=0))


def test_bad_folds(small_quartiles):
    ds = small_quartiles
    with pytest.raises(ValueError, match="cv.n_splits must be an integer >= 2"):
        cross_validate(ds.X_train, ds.y_train, engine="xgboost", objective="squared_error", n_splits=1)
    y = ds.y_train.copy()
    y[:3] = 9   # a class with 3 rows
    with pytest.raises(ValueError, match=r"cv.n_splits=5 exceeds the smallest class count \(3\)"):
        cross_validate(ds.X_train, y, engine="xgboost", objective="squared_error", n_splits=5)


# --------------------------------------------------------------------------- groups and repeats

def _entities(n_entities=300, rows=3, seed=0):
    """Continuous features, each entity's rows identical (labels too): the leak grouped CV must stop."""
    rs = np.random.RandomState(seed)
    X = np.repeat(rs.rand(n_entities, 4), rows, axis=0)
    y = np.repeat(rs.randint(0, 4, n_entities), rows).astype(float)
    g = np.repeat(np.arange(n_entities), rows)
    order = rs.permutation(len(y))
    return X[order], y[order], g[order]


def test_groups_keep_an_entitys_rows_in_one_fold_and_classes_balanced():
    from qwkboost.cv.folds import make_folds

    X, y, g = _entities()
    folds = make_folds(y, 5, True, True, 0, groups=g)
    fold_of = np.empty(len(y), dtype=int)
    for k, (tr, va) in enumerate(folds):
        fold_of[va] = k
        assert not set(g[tr]) & set(g[va])
    for e in np.unique(g):
        assert np.unique(fold_of[g == e]).size == 1
    shares = np.array([np.bincount(y[va].astype(int), minlength=4) / len(va) for _, va in folds])
    assert np.ptp(shares, axis=0).max() < 0.08        # stratified as far as whole groups allow
    unstratified = make_folds(y, 5, False, True, 0, groups=g)
    assert all(not set(g[tr]) & set(g[va]) for tr, va in unstratified)


def test_grouped_cv_does_not_leak_where_plain_cv_does():
    X, y, g = _entities(400)
    kw = dict(engine="lightgbm", objective="squared_error", params={"verbose": -1, "num_threads": 1},
              num_boost_round=300, early_stopping_rounds=20, n_splits=4)
    with pytest.warns(UserWarning, match="1,200 of 1,200 training rows"):
        plain = cross_validate(X, y, **kw)
    grouped = cross_validate(X, y, groups=g, **kw)
    rmse = [np.sqrt(np.mean((cv.oof - y) ** 2)) for cv in (plain, grouped)]
    # copies of the validation rows sit in the training folds of the plain split: it looks far too good
    assert rmse[0] < 0.5 * rmse[1]
    assert grouped.grouped and not plain.grouped and plain.duplicate_rows == 1200 and grouped.duplicate_rows is None
    assert np.mean(grouped.best_iterations) < np.mean(plain.best_iterations)


def test_a_group_column_of_a_dataframe_is_taken_out_of_the_features():
    import pandas as pd

    X, y, g = _entities(100)
    df = pd.DataFrame(X, columns=list("abcd")).assign(user=[f"u{v}" for v in g])
    test = df.iloc[:20].copy()
    cv = cross_validate(df, y, test, groups="user", engine="xgboost", objective="squared_error", num_boost_round=5,
                        n_splits=3)
    assert cv.schema.names == list("abcd") and cv.grouped and cv.test.shape == (20,)
    with pytest.raises(ValueError, match="groups='nobody' names no column of X"):
        cross_validate(df, y, groups="nobody", engine="xgboost", objective="squared_error", n_splits=3)


def test_repeats_average_the_oof_and_keep_every_fold_model(small_quartiles):
    ds = small_quartiles
    kw = dict(engine="xgboost", objective="squared_error", params={"max_depth": 3, "nthread": 1},
              num_boost_round=20, early_stopping_rounds=5, n_splits=3, seed=4)
    one = cross_validate(ds.X_train, ds.y_train, ds.X_test, **kw)
    rep = cross_validate(ds.X_train, ds.y_train, ds.X_test, repeats=3, **kw)
    assert rep.repeats == 3 and len(rep.models) == 9 and rep.fold_of.shape == (3, len(ds.y_train))
    np.testing.assert_array_equal(rep.oof_repeats[0], one.oof)          # repeat 0 is the single run
    np.testing.assert_allclose(rep.oof, rep.oof_repeats.mean(axis=0))
    np.testing.assert_allclose(rep.test, np.mean([m.predict(ds.X_test) for m in rep.models], axis=0))
    assert not np.array_equal(rep.fold_of[0], rep.fold_of[1])           # other splits
    for r in range(3):
        assert sorted(np.bincount(rep.fold_of[r])) == sorted(np.bincount(one.fold_of[0]))
        for k in range(3):
            m = rep.models[r * 3 + k]
            np.testing.assert_allclose(rep.oof_repeats[r][rep.fold_of[r] == k],
                                       m.predict(ds.X_train[rep.fold_of[r] == k]))


def test_identical_rows_warn_only_where_they_tell_of_entities():
    import warnings

    from qwkboost.cv.folds import duplicate_rows, warn_duplicates

    X, y, g = _entities(50)
    assert duplicate_rows(X) == 150
    with pytest.warns(UserWarning, match=r"150 of 150 training rows \(100%\).*cv.group=<column>"):
        warn_duplicates(X)
    coarse = np.random.RandomState(0).randint(0, 5, size=(1000, 3)).astype(float)   # survey-style columns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_duplicates(coarse) > 500              # counted, but identical rows happen by chance here
        few = np.vstack([np.random.RandomState(1).rand(1000, 3), np.random.RandomState(1).rand(5, 3)])
        assert warn_duplicates(few) == 10                 # 1 % or less: no warning


@pytest.mark.parametrize("kw, match", [
    (dict(groups=np.r_[np.nan, np.arange(299) // 3]), r"cv.group is missing in 1 training row\(s\) \(first: row 0\)"),
    (dict(groups=np.zeros(300)), "cv.group has a single value"),
    (dict(groups=np.arange(10)), r"cv.group must hold one value per training row \(300\); got 10"),
    (dict(groups=np.arange(300) % 2, n_splits=3, stratified=False), r"exceeds the number of groups in cv.group \(2\)"),
    (dict(repeats=0), "cv.repeats must be an integer >= 1; got 0"),
    (dict(repeats=2, shuffle=False), "cv.repeats=2 with cv.shuffle=false repeats one split 2 times"),
])
def test_bad_groups_and_repeats_are_refused_before_training(kw, match, monkeypatch):
    import qwkboost.cv.crossval as cvmod

    trained = []
    monkeypatch.setattr(cvmod, "train_scoring", lambda *a, **k: trained.append(1))
    rs = np.random.RandomState(0)
    args = {"engine": "xgboost", "objective": "squared_error", "n_splits": 3, **kw}
    with pytest.raises(ValueError, match=match):
        cross_validate(rs.rand(300, 3), rs.randint(0, 3, 300).astype(float), **args)
    assert not trained


@pytest.mark.parametrize("objective", ["multiclass", "ordinal_logit", "extended_qwk"])
def test_a_fold_trained_without_an_end_of_the_label_range_is_refused(objective, monkeypatch):
    """Ten entities, the top label only in the last one's rows: the fold holding that entity would train on
    labels 0..1 and be scored on 0..2. Refused before any training for an ordinal objective; squared error,
    which takes no label range from its training rows, trains."""
    import qwkboost.cv.crossval as cvmod

    g = np.repeat(np.arange(10), 30)
    y = np.where(g == 9, 2.0, (np.arange(300) % 2).astype(float))
    X = np.random.RandomState(0).rand(300, 3)
    class Trained(Exception):
        pass

    def train(*a, **k):
        trained.append(1)
        raise Trained

    trained = []
    monkeypatch.setattr(cvmod, "train_scoring", train)
    with pytest.raises(ValueError, match=r"label 2: every row with it is in that fold's groups \(cv.group\), so the "
                                         r"models of fold \d would train without it.*; merge label 2 with label 1"):
        cross_validate(X, y, engine="xgboost", objective=objective, n_splits=5, groups=g)
    assert not trained
    with pytest.raises(Trained):                       # squared error gets as far as training
        cross_validate(X, y, engine="xgboost", objective="squared_error", n_splits=5, groups=g)
