"""The study's outside peers (OGBoost, statsmodels' OrderedModel) through qwkboost's folds."""

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold

from qwkboost.data.sources import latent_classes
from qwkboost.evaluation.metrics import qwk
from qwkboost.runs.peers import check_peer, cross_validate_peer


@pytest.mark.parametrize("peer", ["ogboost", "ordered_model"])
def test_peer_gives_probabilities_for_every_row_and_learns(peer):
    ds = latent_classes(n_train=1200, n_test=600)
    y = ds.y_train.astype(int)
    folds = list(StratifiedKFold(3, shuffle=True, random_state=0).split(ds.X_train, y))
    cv = cross_validate_peer(peer, ds.X_train, y, ds.X_test, folds, 4, seed=0)
    assert cv.oof_proba.shape == (1200, 4) and cv.test_proba.shape == (600, 4)
    np.testing.assert_allclose(cv.oof_proba.sum(1), 1, atol=1e-9)
    np.testing.assert_allclose(cv.test_proba.sum(1), 1, atol=1e-9)
    # the quartile-style data is easy: both decode to far better than chance
    assert qwk(ds.y_test.astype(int), cv.test_proba.argmax(1)) > 0.45
    again = cross_validate_peer(peer, ds.X_train, y, ds.X_test, folds, 4, seed=0)
    np.testing.assert_array_equal(cv.test_proba, again.test_proba)    # reproducible


def test_a_class_missing_from_a_fold_gets_probability_zero():
    rs = np.random.RandomState(0)
    X = rs.rand(300, 3)
    y = (X[:, 0] * 3).astype(int)
    y[:2] = 3                                   # class 3: two rows, both in fold 0's validation part
    folds = [(np.arange(2, 300), np.arange(0, 60)), (np.arange(0, 240), np.arange(240, 300))]
    cv = cross_validate_peer("ordered_model", X, y, X[:5], folds, 4)
    assert (cv.oof_proba[:60, 3] == 0).all()
    np.testing.assert_allclose(cv.oof_proba.sum(1)[:60], 1)


def test_unknown_peer_is_refused():
    with pytest.raises(ValueError, match="study peer 'catboost' is unknown; choose from: ogboost, ordered_model"):
        check_peer("catboost")


def test_missing_values_are_filled_inside_each_fold():
    """The peers take no NaN: each fold fills its gaps from its own training rows (medians and a 0/1 column)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = np.digitize(X.sum(axis=1), [-1, 0, 1])
    X[rng.random(X.shape) < 0.1] = np.nan
    X_test = X[:50].copy()
    folds = [(np.arange(400)[np.arange(400) % 2 == k], np.arange(400)[np.arange(400) % 2 != k]) for k in (0, 1)]
    cv = cross_validate_peer("ordered_model", X, y, X_test, folds, 4, seed=0)
    assert np.isfinite(cv.oof_proba).all() and np.allclose(cv.oof_proba.sum(axis=1), 1)
    assert np.isfinite(cv.test_proba).all()
