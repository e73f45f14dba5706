import numpy as np
import pytest

from qwkboost.cv import cross_validate


def test_oof_covers_every_row_once_and_test_is_fold_mean(small_quartiles):
    ds = small_quartiles
    cv = cross_validate(ds.X_train, ds.y_train, ds.X_test, engine="xgboost", objective="squared_error",
                        params={"max_depth": 3}, num_boost_round=30, early_stopping_rounds=5, n_splits=4)
    valid = np.concatenate([va for _, va in cv.folds])
    assert np.array_equal(np.sort(valid), np.arange(len(ds.y_train)))
    for m, (_, va) in zip(cv.models, cv.folds):
        np.testing.assert_allclose(cv.oof[va], m.predict(ds.X_train[va]))
    np.testing.assert_allclose(cv.test, np.mean([m.predict(ds.X_test) for m in cv.models], axis=0))
    assert len(cv.best_iterations) == 4 and cv.fit_seconds > 0


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
