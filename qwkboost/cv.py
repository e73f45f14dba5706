r"""K-fold cross-validation with early stopping on each validation fold.

Each fold trains on :math:`K-1` parts, early-stops on the held-out part, and
predicts it (out-of-fold, OOF) and the test set. Test predictions are the mean
over the fold models, :math:`\hat y^{test} = \frac1K \sum_k F^{(k)}(X^{test})`.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from sklearn.model_selection import KFold, StratifiedKFold

from qwkboost.cluster import train_dask
from qwkboost.engines import Model, train
from qwkboost.features import EncodedFeatures, FeatureSchema
from qwkboost.validation import (SEED_MAX, check_1d, check_bool, check_features, check_int, check_same_length,
                                 check_weight)

__all__ = ["CVResult", "cross_validate", "make_folds", "progress_enabled"]

log = logging.getLogger(__name__)


@dataclass
class CVResult:
    """Out-of-fold and test predictions with the fold models.

    Attributes
    ----------
    oof : ndarray of shape (n_train,)
    test : ndarray of shape (n_test,) or None
        Mean of the fold models' test predictions.
    models : list of Model
    folds : list of (train_idx, valid_idx)
    fit_seconds : float
        Wall time of all fold fits.
    schema : FeatureSchema
        The feature columns the fold models were trained on.
    oof_proba : ndarray of shape (n_train, K) or None
        Out-of-fold class probabilities, for a probabilistic objective.
    test_proba : ndarray of shape (n_test, K) or None
        Mean of the fold models' test class probabilities, for a probabilistic objective.
    """

    oof: np.ndarray
    test: np.ndarray | None
    models: list[Model]
    folds: list[tuple[np.ndarray, np.ndarray]]
    fit_seconds: float
    fold_seconds: list[float] = field(default_factory=list)
    schema: FeatureSchema | None = None
    oof_proba: np.ndarray | None = None
    test_proba: np.ndarray | None = None

    @property
    def best_iterations(self) -> list[int]:
        return [m.best_iteration for m in self.models]

    def curves(self) -> dict[str, list[float]]:
        """Per-round curves averaged over folds, where every fold has that round.

        Keys are ``"{train|valid}_{metric}"``.
        """
        out = {}
        for part in ("train", "valid"):
            series = [m.learning_curve.get(part, []) for m in self.models]
            series = [s for s in series if s]
            if not series:
                continue
            n = min(len(s) for s in series)
            out[f"{part}_{self.models[0].objective.metric_name}"] = list(np.mean([s[:n] for s in series], axis=0))
        return out


def progress_enabled() -> bool:
    """Bars on an interactive terminal only; quiet under CI and in pipes."""
    return sys.stderr.isatty() and not os.environ.get("CI")


def make_folds(y: np.ndarray, n_splits: int, stratified: bool, shuffle: bool, seed: int):
    """The (train_idx, valid_idx) pairs of K-fold CV, stratified by label if asked: the same for the same
    labels and seed, so that every method of a study sees the same folds.

    Raises
    ------
    ValueError
        If ``n_splits`` is above the smallest class count when stratified, or above the number of rows.
    """
    if stratified:
        _, counts = np.unique(y, return_counts=True)
        if counts.min() < n_splits:
            raise ValueError(f"cv.n_splits={n_splits} exceeds the smallest class count ({counts.min()}); "
                             "lower cv.n_splits or set cv.stratified=false")
        splitter = StratifiedKFold(n_splits, shuffle=shuffle, random_state=seed if shuffle else None)
    else:
        if n_splits > len(y):
            raise ValueError(f"cv.n_splits={n_splits} exceeds the number of training rows ({len(y)})")
        splitter = KFold(n_splits, shuffle=shuffle, random_state=seed if shuffle else None)
    return list(splitter.split(np.zeros((len(y), 1)), y))


def cross_validate(X, y, X_test=None, *, engine: str, objective, params: dict | None = None,
                   objective_params: dict | None = None, num_boost_round: int = 10_000,
                   early_stopping_rounds: int | None = 100, n_splits: int = 5, stratified: bool = True,
                   shuffle: bool = True, seed: int = 0, progress: bool | None = None,
                   description: str = "", n_jobs: int | None = None, categorical=None,
                   schema: FeatureSchema | None = None, sample_weight=None, client=None) -> CVResult:
    """Cross-validate one configuration.

    Parameters
    ----------
    X, y : arrays or DataFrame
        Training data; ``y`` on its own scale. String and ``category`` columns
        are categorical, as in :func:`qwkboost.train`.
    X_test : array or DataFrame, optional
        Predicted by every fold model; the mean is returned.
    engine, objective, params, objective_params, num_boost_round, early_stopping_rounds, n_jobs
        Passed to :func:`qwkboost.train`; the validation fold is the eval set.
    n_splits : int, default 5
    stratified : bool, default True
        Stratify folds by label (for classes).
    shuffle : bool, default True
    seed : int
        Fold assignment and engine seed.
    categorical : list of str or int, optional
        Further categorical columns (see :func:`qwkboost.train`).
    schema : FeatureSchema, optional
        ``X`` and ``X_test`` are already encoded by it (a :class:`~qwkboost.data.Dataset`'s).
    sample_weight : array-like, optional
        Row weights: each fold trains and early-stops with its rows' weights.
    client : distributed.Client, optional
        Train each fold on this Dask cluster (:func:`qwkboost.cluster.train_dask`;
        ``engine`` xgboost or lightgbm, numeric features); ``n_jobs`` is then the workers'.
    progress : bool, optional
        A bar over the folds showing the current round and validation metric
        (default: on a terminal, not under CI). Without it, one log line per fold.

    Raises
    ------
    ValueError
        If ``n_splits`` is below 2 or above the smallest class count when stratified.
    """
    from tqdm.auto import tqdm

    if schema is None:
        schema, X = FeatureSchema.fit_encode(X, categorical, "X")
        if X_test is not None:
            X_test = schema.encode(X_test, "X_test", reference="X has")
    else:
        X = EncodedFeatures(check_features(X, "X"), schema).X
        if X_test is not None:
            X_test = EncodedFeatures(check_features(X_test, "X_test"), schema).X
    y = check_1d(y, "y")
    check_same_length(X, y, "X", "y")
    w = check_weight(sample_weight, y.size)
    if client is not None and schema.categorical:
        raise ValueError(f"categorical columns {[schema.column_name(j) for j in schema.categorical]}: on a Dask "
                         "cluster qwkboost trains numeric features only; train on one machine, or encode them")
    n_splits = check_int(n_splits, "cv.n_splits", 2)
    stratified = check_bool(stratified, "cv.stratified")
    shuffle = check_bool(shuffle, "cv.shuffle")
    seed = check_int(seed, "seed", 0, SEED_MAX - n_splits)
    folds = make_folds(y, n_splits, stratified, shuffle, seed)
    progress = progress_enabled() if progress is None else progress
    name = description or f"{engine}/{getattr(objective, 'name', objective)}"
    oof = np.zeros(len(y))
    test = None if X_test is None else np.zeros(len(X_test))
    models, times = [], []
    oof_proba = test_proba = None
    bar = tqdm(total=n_splits, disable=not progress, desc=name, unit="fold", leave=False, dynamic_ncols=True)
    try:
        for k, (tr, va) in enumerate(folds):
            last: dict = {}

            def tick(rnd, evals, k=k, last=last):
                last.update(evals.get("valid", {}))
                if rnd % 10 == 0:
                    bar.set_postfix_str(f"fold {k + 1} round {rnd + 1} " + " ".join(
                        f"{m}={v:.4f}" for m, v in last.items()))

            t0 = time.perf_counter()
            if client is not None:
                model = train_dask(client, X[tr], y[tr], engine=engine, objective=objective, params=params,
                                   objective_params=objective_params, num_boost_round=num_boost_round,
                                   eval_set=(X[va], y[va], None if w is None else w[va]) if engine == "xgboost"
                                   else None,    # lightgbm.dask would score each worker's rows alone
                                   early_stopping_rounds=early_stopping_rounds, seed=seed + k,
                                   sample_weight=None if w is None else w[tr])
            else:
                model = train(EncodedFeatures(X[tr], schema), y[tr], engine=engine, objective=objective,
                              params=params, objective_params=objective_params, num_boost_round=num_boost_round,
                              eval_set=(EncodedFeatures(X[va], schema), y[va], None if w is None else w[va]),
                              early_stopping_rounds=early_stopping_rounds, callbacks=[tick] if progress else None,
                              seed=seed + k, n_jobs=n_jobs, sample_weight=None if w is None else w[tr])
            times.append(time.perf_counter() - t0)
            raw = model.predict_raw(EncodedFeatures(X[va], schema))
            oof[va] = model.objective.decode(raw)
            raw_test = None if test is None else model.predict_raw(EncodedFeatures(X_test, schema))
            if test is not None:
                test += model.objective.decode(raw_test) / n_splits
            try:
                proba = model.objective.predict_proba(raw)
                oof_proba = np.zeros((len(y), proba.shape[1])) if oof_proba is None else oof_proba
                oof_proba[va] = proba
                if test is not None:
                    pt = model.objective.predict_proba(raw_test) / n_splits
                    test_proba = pt if test_proba is None else test_proba + pt
            except NotImplementedError:
                pass
            models.append(model)
            bar.update(1)
            if not progress:
                valid = {m: v[model.best_iteration - 1] for m, v in model.evals_result.get("valid", {}).items()
                         if model.best_iteration and len(v) >= model.best_iteration}
                log.info("%s: fold %d/%d, %d rounds (best %d), %s%.1f s", name, k + 1, n_splits, model.num_rounds,
                         model.best_iteration, "".join(f"valid {m}={v:.4f}, " for m, v in valid.items()), times[-1])
    finally:
        bar.close()
    return CVResult(oof, test, models, folds, float(sum(times)), times, schema, oof_proba, test_proba)
