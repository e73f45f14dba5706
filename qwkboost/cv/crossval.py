r"""Cross-validation: every fold trained with early stopping, grouped and repeated.

Each fold trains on :math:`K-1` parts, early-stops on the held-out part (``early_stopping_on="valid"``) or on
an inner slice of its own training rows (``"inner"``, :func:`~qwkboost.cv.inner.inner_split`), and
predicts the held-out part (out-of-fold, OOF; with ``"other_folds"`` at the rounds the other folds kept,
:func:`~qwkboost.cv.inner.other_rounds`) and the test set. Test predictions are the mean
over the fold models, :math:`\hat y^{test} = \frac1K \sum_k F^{(k)}(X^{test})`.

Rows of one entity (``groups``: a user, a patient) stay in one fold, or the
fold models would be validated on copies of their own training rows. With
``repeats`` > 1 the whole K-fold runs again on other splits and the
out-of-fold scores are averaged over the repeats.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from qwkboost import defaults
from qwkboost.cv.folds import check_fold_labels, fold_assignment, make_repeated_folds, warn_duplicates
from qwkboost.cv.inner import EARLY_STOPPING_ON, INNER_SHARE, default_early_stopping_on, inner_split, other_rounds
from qwkboost.data.features import EncodedFeatures, FeatureSchema
from qwkboost.distributed.training import check_dask_categorical, dask_support, train_dask
from qwkboost.engines import Model
from qwkboost.engines.engine import train_scoring
from qwkboost.objectives import resolve
from qwkboost.validation import (
    SEED_MAX,
    check_1d,
    check_bool,
    check_features,
    check_int,
    check_same_length,
    check_weight,
)

__all__ = ["CVResult", "cross_validate", "progress_enabled"]

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
    repeats : int
        K-fold splits run (``cv.repeats``); ``models`` and ``folds`` hold all of them, repeat by repeat.
    oof_repeats : ndarray of shape (repeats, n_train) or None
        Each repeat's out-of-fold scores (``oof`` is their mean), when ``repeats`` > 1.
    fold_of : ndarray of shape (repeats, n_train)
        The validation fold of every training row in every repeat.
    grouped : bool
        Whether the folds kept each group's rows together.
    duplicate_rows : int or None
        Training rows whose features repeat another row's exactly (counted without groups).
    oof_iterations : list of int
        The rounds at which each fold model's out-of-fold scores were read (its ``best_iteration``, or with
        ``early_stopping_on="other_folds"`` the other folds' median).
    predict_seconds : float
        Wall time of the fold models' predictions of their out-of-fold and test rows: with ``fit_seconds``, most of
        a cross-validation (on MovieLens, LightGBM on one core: 24 s of predictions beside 32 s of training).
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
    repeats: int = 1
    oof_repeats: np.ndarray | None = None
    fold_of: np.ndarray | None = None
    grouped: bool = False
    duplicate_rows: int | None = None
    oof_iterations: list[int] = field(default_factory=list)
    predict_seconds: float = 0.0

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


def _is_ordinal(objective, objective_params) -> bool:
    """Whether ``objective`` needs ordinal labels (its own errors, if any, are raised where it is trained)."""
    try:
        return bool(resolve(objective, **(objective_params or {})).ordinal)
    except Exception:
        return False


def cross_validate(X, y, X_test=None, *, engine: str | None = None, objective=None, params: dict | None = None,
                   objective_params: dict | None = None, num_boost_round: int = 10_000,
                   early_stopping_rounds: int | None = 100, n_splits: int = 5, stratified: bool = True,
                   shuffle: bool = True, seed: int = 0, progress: bool | None = None,
                   description: str = "", n_jobs: int | None = None, categorical=None,
                   schema: FeatureSchema | None = None, sample_weight=None, client=None, groups=None,
                   repeats: int = 1, early_stopping_min_delta: float | None = None, on_fold=None,
                   on_round=None, early_stopping_on: str | None = "valid", dask_stop=None,
                   fold_scores: bool = True) -> CVResult:
    r"""Cross-validate one configuration, optionally grouped and repeated.

    With ``repeats`` :math:`R > 1`, :math:`R` K-fold splits are drawn (seeds
    ``seed``, ``seed + 1``, ...). A row's out-of-fold score is the mean over
    the repeats of the score of the fold model that did not see it,
    :math:`\hat y^{oof}_i = \frac1R \sum_r F^{(r, k_r(i))}(x_i)`, and the test
    score the mean over all :math:`RK` fold models.

    Parameters
    ----------
    X, y : arrays or DataFrame
        Training data; ``y`` on its own scale. String and ``category`` columns
        are categorical, as in :func:`qwkboost.train`.
    X_test : array or DataFrame, optional
        Predicted by every fold model; the mean is returned.
    engine, objective, params, objective_params, num_boost_round, early_stopping_rounds, n_jobs
        Passed to :func:`qwkboost.train` (``None``: the project's defaults); the validation fold is the eval set.
    early_stopping_min_delta : float, optional
        Passed to :func:`qwkboost.train`: the smallest gain of the validation metric that counts as an
        improvement; ``None``: the objective's own.
    early_stopping_on : {"valid", "inner", "other_folds"} or None, default "valid"
        Where each fold's early stopping looks (``cv.early_stopping_on``; ``None``: the runs' setting in
        ``conf/cv/kfold.yaml``, :func:`~qwkboost.cv.inner.default_early_stopping_on`). ``"valid"``: the fold it
        scores, so the fold's labels choose its model's number of rounds and the out-of-fold score is
        optimistic (on random labels a blend's nested estimate by 0.035 QWK: ``benchmarks/noise_estimate.py``).
        ``"inner"``: a stratified, seeded slice of :data:`~qwkboost.cv.inner.INNER_SHARE` of the fold's
        training rows (:func:`~qwkboost.cv.inner.inner_split`, seed ``seed + i`` for fold ``i``); the model
        trains on the rest, and the scored fold's labels never reach it.
        ``"other_folds"``: as ``"valid"`` (the same models and test scores), but each fold's out-of-fold scores
        (and class probabilities) are read at the median of the rounds the other folds of its repeat kept
        (:func:`~qwkboost.cv.inner.other_rounds`), so cut points, blends and their nested estimates see
        scores whose rounds the fold's own labels did not choose; ``on_fold`` still sees the fold's own-round
        scores, the final ones being known only when every fold has finished. Without ``early_stopping_rounds``
        all three train and score as ``"valid"``.
    n_splits : int, default 5
    stratified : bool, default True
        Stratify folds by label (for classes).
    shuffle : bool, default True
    seed : int
        Fold assignment and engine seeds (fold ``k`` of repeat ``r`` trains with ``seed + r * n_splits + k``).
    categorical : list of str or int, optional
        Further categorical columns (see :func:`qwkboost.train`).
    schema : FeatureSchema, optional
        ``X`` and ``X_test`` are already encoded by it (a :class:`~qwkboost.data.dataset.Dataset`'s).
    sample_weight : array-like, optional
        Row weights: each fold trains and early-stops with its rows' weights.
    client : distributed.Client, optional
        Train each fold on this Dask cluster (:func:`qwkboost.distributed.training.train_dask`;
        ``engine`` xgboost or lightgbm; categorical columns on xgboost, with the codes of this process);
        ``n_jobs`` is then the workers'.
    dask_stop : RoundStop, optional
        With ``client``: asked on the workers after each round (a stop from the client, a deadline), since
        ``on_round`` runs in this process and the workers' rounds do not
        (:func:`~qwkboost.distributed.training.train_dask`).
    groups : array-like or str, optional
        The entity of every training row (a user, a patient): rows of one entity
        stay in one fold (:func:`~qwkboost.cv.folds.make_folds`). A column name of a DataFrame ``X``
        takes that column out of the features (and out of ``X_test``). Without
        groups, many training rows with identical features draw a warning
        (:func:`~qwkboost.cv.folds.warn_duplicates`).
    repeats : int, default 1
        K-fold splits with different seeds; their out-of-fold scores are averaged.
    progress : bool, optional
        A bar over the folds showing the current round and validation metric
        (default: on a terminal, not under CI). Without it, one log line per fold.
    on_fold : callable, optional
        Called after each fold as ``on_fold(i, valid_rows, scores)`` with the fold's number (0-based, over all
        repeats), its validation rows and their scores; an exception it raises (a pruned trial's) stops the CV.
    fold_scores : bool, default True
        Whether ``on_fold`` reads ``scores``. With ``"other_folds"`` they cost a prediction of the fold's rows at its
        own rounds (its out-of-fold scores are read again at the other folds' rounds): without it ``on_fold`` gets
        ``None`` for them (a time guard's).
    on_round : callable, optional
        Called after every boosting round as ``on_round(i, round, evals)`` with the fold's number, the round
        (0-based) and the round's metrics (:func:`qwkboost.train`'s callbacks); an exception it raises (a time
        limit's :class:`~qwkboost.exceptions.RunStopped`) stops the CV in the middle of a fold (on one machine).

    Raises
    ------
    ValueError
        If ``n_splits`` is below 2 or above the smallest class count when stratified; for bad
        ``groups`` or ``repeats`` (before any training).
    """
    from tqdm.auto import tqdm  # slow to import: tqdm

    engine = defaults.default_engine() if engine is None else engine
    objective = defaults.default_objective() if objective is None else objective
    if isinstance(groups, str):
        if schema is not None or not (hasattr(X, "columns") and groups in X.columns):
            raise ValueError(f"groups={groups!r} names no column of X; give a DataFrame X with that column, or "
                             "an array of one entity per row")
        column = groups
        X, groups = X.drop(columns=[column]), X[column].to_numpy()
        if hasattr(X_test, "columns") and column in X_test.columns:
            X_test = X_test.drop(columns=[column])
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
    if client is not None:
        check_dask_categorical(engine, [schema.column_name(j) for j in schema.categorical])
    n_splits = check_int(n_splits, "cv.n_splits", 2)
    repeats = check_int(repeats, "cv.repeats", 1)
    stratified = check_bool(stratified, "cv.stratified")
    shuffle = check_bool(shuffle, "cv.shuffle")
    seed = check_int(seed, "seed", 0, SEED_MAX - n_splits * repeats)
    early_stopping_on = default_early_stopping_on() if early_stopping_on is None else early_stopping_on
    if early_stopping_on not in EARLY_STOPPING_ON:
        raise ValueError(f"cv.early_stopping_on={early_stopping_on!r} is unknown; choose one of: "
                         f"{', '.join(EARLY_STOPPING_ON)}")
    inner = early_stopping_on == "inner" and early_stopping_rounds is not None
    others = early_stopping_on == "other_folds" and early_stopping_rounds is not None
    gcodes = None if groups is None or not inner else np.unique(np.asarray(groups, dtype=object).astype(str),
                                                                return_inverse=True)[1].ravel()
    plan = make_repeated_folds(y, n_splits, stratified, shuffle, seed, repeats, groups)
    if _is_ordinal(objective, objective_params):
        check_fold_labels(y, plan, groups is not None)
    n_dup = warn_duplicates(X, schema) if groups is None else None
    folds = [f for split in plan for f in split]
    progress = progress_enabled() if progress is None else progress
    name = description or f"{engine}/{getattr(objective, 'name', objective)}"
    oof_repeats = np.zeros((repeats, len(y)))
    test = None if X_test is None else np.zeros(len(X_test))
    models, times, predicting, at_bests = [], [], 0.0, []
    oof_proba = test_proba = None
    n_models = len(folds)
    bar = tqdm(total=n_models, disable=not progress, desc=name, unit="fold", leave=False, dynamic_ncols=True)
    try:
        for i, (tr, va) in enumerate(folds):
            # the rows early stopping looks at: the fold it scores, or a slice of its own training rows
            st = va
            if inner:
                fit, stop = inner_split(y[tr], seed + i, stratified, None if gcodes is None else gcodes[tr])
                tr, st = tr[fit], tr[stop]
            r, k = divmod(i, n_splits)
            where = f"fold {k + 1}/{n_splits}" + (f" of repeat {r + 1}/{repeats}" if repeats > 1 else "")
            last: dict = {}

            def tick(rnd, evals, where=where, last=last):
                last.update(evals.get("valid", {}))
                if rnd % 10 == 0:
                    bar.set_postfix_str(f"{where} round {rnd + 1} " + " ".join(
                        f"{m}={v:.4f}" for m, v in last.items()))

            callbacks = [tick] if progress else []
            if on_round is not None:
                callbacks.append(lambda rnd, evals, i=i: on_round(i, rnd, evals))
            t0 = time.perf_counter()
            if client is not None:
                model = train_dask(client, EncodedFeatures(X[tr], schema), y[tr], engine=engine, objective=objective,
                                   params=params, objective_params=objective_params, num_boost_round=num_boost_round,
                                   # an engine whose workers do not all-reduce would score each worker's rows alone
                                   eval_set=(EncodedFeatures(X[st], schema), y[st], None if w is None else w[st])
                                   if dask_support(engine).allreduce else None,
                                   early_stopping_rounds=early_stopping_rounds, seed=seed + i,
                                   sample_weight=None if w is None else w[tr],
                                   early_stopping_min_delta=early_stopping_min_delta, stop=dask_stop)
                at_best = raw_test = None
            else:
                # the test rows, and the fold's own when early stopping looks elsewhere, scored as the engine
                # boosts where it can (LightGBM): a quarter of the cost of predicting them afterwards
                rows = (() if test is None else (EncodedFeatures(X_test, schema),)) + \
                    ((EncodedFeatures(X[va], schema),) if inner else ())
                fitted = train_scoring(
                    EncodedFeatures(X[tr], schema), y[tr], engine=engine, objective=objective, params=params,
                    objective_params=objective_params, num_boost_round=num_boost_round,
                    eval_set=(EncodedFeatures(X[st], schema), y[st], None if w is None else w[st]),
                    early_stopping_rounds=early_stopping_rounds, callbacks=callbacks or None, seed=seed + i,
                    n_jobs=n_jobs, sample_weight=None if w is None else w[tr],
                    early_stopping_min_delta=early_stopping_min_delta, score_rows=rows)
                model = fitted.model
                at_best = fitted.rows[-1] if inner else fitted.valid
                raw_test = None if test is None else fitted.rows[0]
            times.append(time.perf_counter() - t0)
            at_bests.append(at_best)
            t0 = time.perf_counter()
            # with other_folds the fold's rows are read again below: now only when on_fold wants their scores
            own = not others or (on_fold is not None and fold_scores)
            if own:
                raw = at_best if at_best is not None else model.predict_raw(EncodedFeatures(X[va], schema))
                oof_repeats[r, va] = model.objective.decode(raw)
            if test is not None and raw_test is None:
                raw_test = model.predict_raw(EncodedFeatures(X_test, schema))
            predicting += time.perf_counter() - t0
            if test is not None:
                test += model.objective.decode(raw_test) / n_models
            try:
                if not others:          # other_folds: read again below
                    proba = model.objective.predict_proba(raw)
                    oof_proba = np.zeros((len(y), proba.shape[1])) if oof_proba is None else oof_proba
                    oof_proba[va] += proba / repeats
                if test is not None:
                    pt = model.objective.predict_proba(raw_test) / n_models
                    test_proba = pt if test_proba is None else test_proba + pt
            except NotImplementedError:
                pass
            models.append(model)
            bar.update(1)
            if on_fold is not None:
                on_fold(i, va, oof_repeats[r, va] if own else None)
            if not progress:
                valid = {m: v[model.best_iteration - 1] for m, v in model.evals_result.get("valid", {}).items()
                         if model.best_iteration and len(v) >= model.best_iteration}
                log.info("%s: %s, %d rounds (best %d), %s%.1f s", name, where, model.num_rounds,
                         model.best_iteration, "".join(f"valid {m}={v:.4f}, " for m, v in valid.items()), times[-1])
    finally:
        bar.close()
    read = [m.best_iteration for m in models]
    if others:          # each fold's out-of-fold scores at the rounds the other folds of its repeat kept
        for i, (model, (_, va)) in enumerate(zip(models, folds)):
            r, k = divmod(i, n_splits)
            read[i] = other_rounds(np.array([m.best_iteration for m in models[r * n_splits:(r + 1) * n_splits]]),
                                   k, model.num_rounds)
            t0 = time.perf_counter()
            raw = model.predict_raw_from(EncodedFeatures(X[va], schema), at_bests[i], read[i])
            predicting += time.perf_counter() - t0
            oof_repeats[r, va] = model.objective.decode(raw)
            try:
                proba = model.objective.predict_proba(raw)
            except NotImplementedError:
                continue
            oof_proba = np.zeros((len(y), proba.shape[1])) if oof_proba is None else oof_proba
            oof_proba[va] += proba / repeats
    oof = oof_repeats[0] if repeats == 1 else oof_repeats.mean(axis=0)
    return CVResult(oof, test, models, folds, float(sum(times)), times, schema, oof_proba, test_proba,
                    repeats=repeats, oof_repeats=oof_repeats if repeats > 1 else None,
                    fold_of=fold_assignment(folds, len(y), repeats), grouped=groups is not None,
                    duplicate_rows=n_dup, oof_iterations=read, predict_seconds=predicting)
