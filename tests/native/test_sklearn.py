"""The scikit-learn estimator."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.utils.estimator_checks import check_estimator

from qwkboost.native.sklearn import NativeGBDTRegressor


def test_check_estimator():
    results = check_estimator(NativeGBDTRegressor(n_estimators=8), on_fail=None)
    failed = [(r["check_name"], str(r["exception"])) for r in results if r["status"] == "failed"]
    assert not failed
    assert sum(r["status"] == "passed" for r in results) >= 45


def test_fit_predict_params_and_importances(chisq_small):
    X, y = chisq_small
    est = NativeGBDTRegressor(n_estimators=30, max_depth=3, learning_rate=0.2, subsample=0.8, random_state=3)
    assert est.get_params()["max_depth"] == 3
    est.fit(X, y)
    assert est.score(X, y) > 0.8
    assert est.feature_importances_.sum() == pytest.approx(1.0)
    staged = list(est.staged_predict(X[:5]))
    np.testing.assert_allclose(staged[-1], est.predict(X[:5]))
    again = clone(est).fit(X, y)
    np.testing.assert_array_equal(again.predict(X), est.predict(X))
    assert cross_val_score(NativeGBDTRegressor(n_estimators=20, max_depth=3), X, y, cv=3).mean() > 0.5


def test_nan_and_eval_set(with_missing):
    X, y = with_missing
    est = NativeGBDTRegressor(n_estimators=200, max_depth=3, learning_rate=0.3)
    est.fit(X[:900], y[:900], eval_set=(X[900:], y[900:]), early_stopping_rounds=5)
    assert est.best_iteration_ < 200
    assert np.isfinite(est.predict(X)).all()


def test_extended_qwk_objective(small_quartiles):
    ds = small_quartiles
    est = NativeGBDTRegressor(objective="extended_qwk", n_estimators=60, max_depth=3, learning_rate=0.1)
    est.fit(ds.X_train, ds.y_train)
    assert est.objective_.metric_name == "kappa"


def test_early_stopping_needs_an_eval_set_and_finite_labels(with_missing):
    X, y = with_missing
    est = NativeGBDTRegressor(n_estimators=50)
    with pytest.raises(ValueError, match="early_stopping_rounds needs an eval_set"):
        est.fit(X, y, early_stopping_rounds=5)
    yv = y[900:].copy()
    yv[3] = np.nan
    with pytest.raises(ValueError, match=r"eval_set y contains 1 NaN or inf value\(s\) \(first at index 3"):
        est.fit(X[:900], y[:900], eval_set=(X[900:], yv), early_stopping_rounds=5)


def test_the_estimator_exposes_every_engine_parameter_with_its_default():
    from qwkboost.native.params import PARAMS

    got = NativeGBDTRegressor().get_params()
    for p in PARAMS:
        assert p.name in got, p.name
        assert got[p.name] == p.default or (got[p.name] is None and p.default is None)
    est = NativeGBDTRegressor(n_estimators=3, prune="pre", enable_bundle=False, refit="step", refit_iter=2)
    assert est._engine_params()["prune"] == "pre" and est._engine_params()["enable_bundle"] is False


def test_every_parameter_has_one_check_and_one_default():
    from qwkboost.native.params import ALIASES, DEFAULTS, PARAMS, resolve_params

    assert len({p.name for p in PARAMS}) == len(PARAMS) == len(DEFAULTS)
    assert resolve_params({}) == {**DEFAULTS, "monotone_constraints": None}
    for alias, name in ALIASES.items():
        assert resolve_params({alias: DEFAULTS[name]})[name] == DEFAULTS[name]
