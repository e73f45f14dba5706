r"""Ordinal models qwkboost did not write, run through the same folds and scoring as the engines.

* ``ogboost``: OGBoost's ``GradientBoostingOrdinal`` (Mahani and Sharabiani,
  "Ordinal gradient boosting", Journal of Statistical Software 117, 2025), a
  cumulative-link model whose latent score is boosted with scikit-learn trees
  and whose cut points are updated by gradient steps. Its authors' defaults:
  regression trees of depth 3, learning rate 0.1, probit link; early stopping
  on its own 10 % holdout after 10 rounds without improvement.
* ``ordered_model``: statsmodels' linear ``OrderedModel`` (proportional odds,
  logit link), fitted by maximum likelihood (BFGS).

Both give class probabilities. A peer is scored twice: as its authors decode
(the most probable class, which is what ``GradientBoostingOrdinal.predict``
returns) and through qwkboost's out-of-fold cut points on its expected class
:math:`\sum_k k\,p_k`, like every qwkboost objective.

Both packages are optional: ``pip install 'qwkboost[study]'``.
"""

from __future__ import annotations

import importlib.util
import time
import warnings
from dataclasses import dataclass

import numpy as np

__all__ = ["PEERS", "PeerCV", "check_peer", "cross_validate_peer"]

#: The peers a study can run, with the package each needs.
PEERS = {"ogboost": "ogboost", "ordered_model": "statsmodels"}


@dataclass
class PeerCV:
    """Out-of-fold and test class probabilities of a peer, over the study's folds.

    Attributes
    ----------
    oof_proba : ndarray of shape (n_train, K)
    test_proba : ndarray of shape (n_test, K)
        Mean over the fold models.
    fit_seconds : float
    """

    oof_proba: np.ndarray
    test_proba: np.ndarray
    fit_seconds: float


def check_peer(name: str) -> None:
    """Refuse an unknown peer, or one whose package is not installed, naming the fix."""

    if name not in PEERS:
        raise ValueError(f"study peer {name!r} is unknown; choose from: {', '.join(PEERS)}")
    if importlib.util.find_spec(PEERS[name]) is None:
        raise ValueError(f"study peer {name!r} needs the package {PEERS[name]!r}, which is not installed: "
                         "pip install -e '.[study]' (or drop it from study.methods)")


def _fit_predict_ogboost(X, y, X_eval, n_classes: int, seed: int) -> list[np.ndarray]:
    from sklearn.tree import DecisionTreeRegressor  # slow to import: sklearn

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # its default argument builds a tree with a deprecated criterion
        from ogboost import GradientBoostingOrdinal  # optional: ogboost

        model = GradientBoostingOrdinal(base_learner=DecisionTreeRegressor(max_depth=3), n_estimators=1000,
                                        n_iter_no_change=10, n_class=n_classes, random_state=seed)
        model.fit(X, y)
    return [model.predict_proba(Z) for Z in X_eval]


def _fit_predict_ordered_model(X, y, X_eval, n_classes: int, seed: int) -> list[np.ndarray]:
    from statsmodels.miscmodels.ordinal_model import OrderedModel  # optional: statsmodels

    keep = X.max(axis=0) > X.min(axis=0)       # a constant column would be a second intercept
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = OrderedModel(y, X[:, keep], distr="logit").fit(method="bfgs", disp=False, maxiter=1000)
    return [np.asarray(res.model.predict(res.params, exog=Z[:, keep])) for Z in X_eval]


_FITS = {"ogboost": _fit_predict_ogboost, "ordered_model": _fit_predict_ordered_model}


def cross_validate_peer(name: str, X, y, X_test, folds, n_classes: int, seed: int = 0,
                        repeats: int = 1) -> PeerCV:
    """Fit the peer on each fold's training rows; predict its validation rows and the test set.

    ``y`` holds class indices 0..``n_classes``-1. A class absent from a fold's
    training rows gets probability 0 there (the peers index classes by what they saw).
    ``folds`` may hold ``repeats`` K-fold splits one after the other; out-of-fold
    probabilities are then the mean over the repeats. The peers take no missing values: where there are
    some, each fold fills them with its training rows' column medians and adds a 0/1 column per such
    feature (scikit-learn's ``SimpleImputer(add_indicator=True)``, fitted on the fold's training rows only).
    """
    check_peer(name)
    X, X_test = np.asarray(X, dtype=float), np.asarray(X_test, dtype=float)
    missing = bool(np.isnan(X).any() or np.isnan(X_test).any())
    y = np.asarray(y).astype(np.int64)
    oof = np.zeros((len(y), n_classes))
    test = np.zeros((len(X_test), n_classes))
    t0 = time.perf_counter()
    for k, (tr, va) in enumerate(folds):
        present = np.unique(y[tr])
        local = np.searchsorted(present, y[tr])       # the peers want classes 0..m-1, all present
        X_tr, X_va, X_te = X[tr], X[va], X_test
        if missing:
            from sklearn.impute import SimpleImputer  # slow to import: sklearn

            imp = SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True).fit(X_tr)
            X_tr, X_va, X_te = imp.transform(X_tr), imp.transform(X_va), imp.transform(X_te)
        p_va, p_te = _FITS[name](X_tr, local, [X_va, X_te], present.size, seed + k)
        oof[np.ix_(va, present)] += p_va / repeats
        test[:, present] += p_te / len(folds)
    return PeerCV(oof, test, time.perf_counter() - t0)
