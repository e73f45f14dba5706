r"""Pruning a trial after a CV fold: every trial reports a score after each fold, on one scale, and a pruner stops
the trials that are clearly worse.

Optuna's per-round pruning callbacks (its LightGBM and XGBoost integrations) report per boosting round, and in a
fold loop every fold restarts at round 0, so only the first fold would count; what fits is a report after each
fold. The folds are fixed and seeded (the same for every trial), and the fold's score is the study's metric on the
fold's validation rows: ``qwk_thresholds_oof`` as QWK after cut points fitted on those rows (the same method as
the run's), ``qwk_round_oof`` rounded, ``kappa_tilde_oof`` as extended QWK, ``rmse_oof`` as RMSE.

=======================  ===========================================================================================
``none``                 every trial runs all its folds
``median``               Optuna's ``MedianPruner``: after fold 2 on, a trial whose running mean of fold scores is
                         worse than the median of the earlier trials' at the same fold stops (5 trials first)
``successive_halving``   Optuna's ``SuccessiveHalvingPruner`` on the running mean (asynchronous successive
                         halving, a reduction factor of 3): after fold 2 and after fold 4, a trial goes on only
                         if its running mean is in the top third of the trials that reached that fold (the default)
``wilcoxon``             Optuna's ``WilcoxonPruner`` on the fold scores themselves, paired with the best trial's:
                         with 5 folds its smallest possible p after 2, 3 and 4 folds is 0.25, 0.125 and 0.0625, so
                         at ``p_threshold=0.1`` it can prune only after fold 4
=======================  ===========================================================================================

A pruned trial raises :class:`~qwkboost.exceptions.RunStopped` from the fold loop (no cut points, no outputs; its
MLflow run ends KILLED, tagged ``qwkboost.trial_state=PRUNED``), keeps its fold scores as the trial's user
attribute ``fold_scores``, and is Optuna's ``PRUNED``.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import optuna

from qwkboost import tracking
from qwkboost.data.dataset import class_range
from qwkboost.evaluation.metrics import extended_qwk, qwk, rmse
from qwkboost.evaluation.thresholds import apply_thresholds, fit_thresholds
from qwkboost.exceptions import RunStopped
from qwkboost.runs.tuning.storage import load_storage
from qwkboost.tracking.vocabulary import metric_name

__all__ = ["PRUNERS", "DEFAULT_PRUNER", "make_pruner", "FoldReporter", "fold_score", "fold_reporter",
           "stored_fold_reporter"]

PRUNERS = ("none", "median", "successive_halving", "wilcoxon")
#: ``tune.pruner``'s default: in ``benchmarks/tuning.py`` (54 studies of 30 trials) the fastest, 0.56x the wall time
#: of no pruning (median, paired), at the same test QWK (+0.0007 +- 0.0015); see the tuning docs.
DEFAULT_PRUNER = "successive_halving"


def make_pruner(name: str) -> optuna.pruners.BasePruner:
    """The pruner ``tune.pruner`` names (see the module's table)."""
    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1)
    if name == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    if name == "wilcoxon":

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.pruners.WilcoxonPruner(p_threshold=0.1, n_startup_steps=2)
    raise ValueError(f"tune.pruner={name!r} is unknown; choose one of: {', '.join(PRUNERS)}")


def fold_score(metric: str, y: np.ndarray, scores: np.ndarray, classes: np.ndarray | None, method: str,
               weight: np.ndarray | None = None) -> float:
    """The study's ``metric`` on one fold's validation rows (labels ``y``, scores ``scores``)."""
    if metric == "rmse_oof" or classes is None:
        return rmse(y, scores, weight)
    lo, hi, k = float(classes[0]), float(classes[-1]), classes.size
    y_idx = (y - lo).astype(np.int64)
    if metric == "kappa_tilde_oof":
        return extended_qwk(y, np.clip(scores, lo, hi), sample_weight=weight)
    if metric == "qwk_round_oof" or method == "round":
        return qwk(y_idx, apply_thresholds(scores, classes[:-1] + 0.5), n_classes=k, sample_weight=weight)
    cuts = fit_thresholds(method, scores - lo, y_idx, n_classes=k, sample_weight=weight)
    return qwk(y_idx, apply_thresholds(scores - lo, cuts), n_classes=k, sample_weight=weight)


class FoldReporter:
    """Reports a trial's fold scores to Optuna after each fold, and stops the trial when its pruner says so.

    Parameters
    ----------
    trial : optuna.Trial
    pruner : str
        ``wilcoxon`` is given each fold's score; the others the running mean of the folds so far.
    metric, method : str
        The study's metric and the run's cut-point method (:func:`fold_score`).
    y, classes, weight
        The training labels (the fold's rows are taken from them), the classes, the row weights.
    """

    def __init__(self, trial, pruner: str, metric: str, method: str, y, classes, weight=None):
        self.trial, self.pruner, self.metric, self.method = trial, pruner, metric, method
        self.y, self.classes, self.weight = np.asarray(y, dtype=np.float64), classes, weight
        self.scores: list[float] = []

    def __call__(self, i: int, rows: np.ndarray, scores: np.ndarray) -> None:
        w = None if self.weight is None else self.weight[rows]
        s = fold_score(self.metric, self.y[rows], scores, self.classes, self.method, w)
        self.scores.append(float(s))
        self.trial.set_user_attr("fold_scores", self.scores)
        mlflow = sys.modules.get("mlflow")      # the trial's run, where one is active: fold k's score at step k
        if mlflow is not None and mlflow.active_run() is not None:
            tracking.log_metrics({f"fold_{metric_name(self.metric)}": float(s)}, step=i + 1)
        value = s if self.pruner == "wilcoxon" else float(np.mean(self.scores))
        self.trial.report(value, step=i)
        if self.trial.should_prune():
            raise RunStopped(f"pruned by the {self.pruner} pruner after fold {i + 1} ({self.metric} of the folds "
                             f"so far: {np.mean(self.scores):.4f})",
                             tags={"qwkboost.trial_state": "PRUNED", "qwkboost.pruned_after_fold": str(i + 1)})


def fold_reporter(trial, pruner: str, method: str, dataset, metric: str = "qwk_thresholds_oof") -> FoldReporter:
    """The :class:`FoldReporter` of ``trial`` on ``dataset``'s training rows (their labels, classes and weights;
    no classes for data that is not ordinal).

    Parameters
    ----------
    trial : optuna.Trial
    pruner : str
        ``tune.pruner`` or ``auto.pruner`` (:data:`PRUNERS`).
    method : str
        The run's cut-point method (``thresholds.method``).
    dataset : Dataset
    metric : str
        The study's metric.
    """
    classes = class_range(dataset.classes) if dataset.is_ordinal else None
    return FoldReporter(trial, pruner, metric, method, dataset.y_train, classes, dataset.w_train)


def stored_fold_reporter(storage: str, study_name: str, trial_id: int, pruner: str, method: str, dataset,
                         metric: str = "qwk_thresholds_oof") -> FoldReporter:
    """:func:`fold_reporter` of trial ``trial_id`` (Optuna's id, not its number) of study ``study_name`` in
    ``storage``, loaded where the trial runs (a Dask worker) so that its pruner runs there.

    Parameters
    ----------
    storage : str
        An RDB URL the process reaches, or a study on the Dask scheduler
        (:func:`~qwkboost.runs.tuning.storage.load_storage`).
    study_name : str
    trial_id : int
    pruner, method, dataset, metric
        As :func:`fold_reporter`'s.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=study_name, storage=load_storage(storage), pruner=make_pruner(pruner))
    return fold_reporter(optuna.trial.Trial(study, trial_id), pruner, method, dataset, metric)
