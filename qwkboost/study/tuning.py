"""An equal tuning budget for every tuned method of a study: Optuna trials on the training folds only.

A tuned cell first runs a small Optuna study of its own on its training rows, with the folds the cell then uses:
the same number of trials for every objective and engine (``study.tuning.n_trials``), drawn from the engine's
``search_space`` (``conf/engine/*.yaml``) by a seeded multivariate TPE sampler, each trial scored by the QWK of
exact cut points fitted on its out-of-fold scores (``qwk_thresholds_oof``, the same yardstick for every
objective), and stopped after a fold by the same pruner (:mod:`qwkboost.runs.tuning.pruners`). The cell is then
trained with the best trial's parameters. The test rows are never seen; the cell's out-of-fold figures are
flattered by the selection, its test figures are not.

By default (``study.tuning.per_seed: false``) a method is tuned once per training set, with the study's first
seed's folds and draws, and every seed trains with those parameters (:func:`tuned_once`): the seeds then measure
the training's variation, not the tuner's, and the study costs one tuning per data set, engine and method.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
from filelock import FileLock

from qwkboost.evaluation.metrics import qwk
from qwkboost.evaluation.thresholds import apply_thresholds, fit_thresholds
from qwkboost.exceptions import RunStopped
from qwkboost.runs.tuning.space import suggest
from qwkboost.study.cache import replaced

__all__ = ["tune_cell", "tuned_once"]


def tune_cell(cross_validate: Callable[..., Any], y: np.ndarray, classes: np.ndarray, space: Mapping[str, Any],
              params: Mapping[str, Any], n_trials: int, pruner: str, seed: int) -> dict:
    """Search ``space`` around ``params`` for ``n_trials`` trials; return the best parameters and the record.

    Parameters
    ----------
    cross_validate : callable
        ``cross_validate(params, on_fold)`` runs the cell's CV on its training rows with ``params`` and returns
        a :class:`~qwkboost.cv.crossval.CVResult`; ``on_fold`` reports each fold's score to the trial.
    y, classes : ndarray
        The training labels and the label scale.
    space : mapping
        The engine's ``search_space``.
    params : mapping
        The engine's parameters; a trial's draws replace the ones it names.
    n_trials : int
        Trials started (pruned trials count): the budget every tuned method of a study gets.
    pruner : str
        A name of :data:`~qwkboost.runs.tuning.pruners.PRUNERS`.
    seed : int
        The seed of the sampler (:func:`~qwkboost.runs.tuning.samplers.make_sampler`'s TPE, seeded per trial): the
        same cell draws the same trials.

    Returns
    -------
    dict
        ``params`` (the best trial's draws), ``best_oof`` (its ``qwk_thresholds_oof``), ``n_trials``,
        ``n_pruned``, ``seconds``.
    """
    import optuna  # slow to import: optuna

    from qwkboost.runs.tuning.pruners import FoldReporter, make_pruner  # slow to import: optuna
    from qwkboost.runs.tuning.samplers import make_sampler  # slow to import: optuna

    if not space:
        raise ValueError("study.tuning needs the engine's search_space (conf/engine/<engine>.yaml); it is empty")
    t0 = time.perf_counter()
    lo, k = float(classes[0]), int(classes.size)
    y_idx = (np.asarray(y, dtype=np.float64) - lo).astype(np.int64)

    def objective(trial) -> float:
        drawn = suggest(trial, space)
        reporter = FoldReporter(trial, pruner, "qwk_thresholds_oof", "exact", y, classes)
        try:
            cv = cross_validate({**params, **drawn}, reporter)
        except RunStopped as stop:
            raise optuna.TrialPruned(str(stop)) from None
        cuts = fit_thresholds("exact", cv.oof - lo, y_idx, n_classes=k)
        return float(qwk(y_idx, apply_thresholds(cv.oof - lo, cuts), n_classes=k))

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # experiments/tune.py's TPE (multivariate, seeded per trial), so a study's tuning draws as tuning does
    study = optuna.create_study(direction="maximize", sampler=make_sampler("tpe", seed), pruner=make_pruner(pruner))
    study.optimize(objective, n_trials=n_trials, gc_after_trial=False)
    states = [t.state for t in study.trials]
    if optuna.trial.TrialState.COMPLETE not in states:
        raise RuntimeError(f"study.tuning: none of {n_trials} trials completed")
    best = study.best_trial
    return {"params": dict(best.params), "best_oof": float(best.value), "n_trials": len(states),
            "n_pruned": states.count(optuna.trial.TrialState.PRUNED), "seconds": time.perf_counter() - t0}


def tuned_once(directory: str | None, key: str, tune: Callable[[], dict]) -> dict:
    """``tune()``'s result, computed once for ``key`` and kept as JSON in ``directory``.

    ``key`` is the hash of everything the tuning depends on (:func:`qwkboost.study.cells.cell_key` of the
    tuning seed's configuration and the method, its budget and pruner). Parallel cells that need the same tuning
    wait for the first one (:class:`filelock.FileLock`, released also when its process dies) and read its result,
    written atomically (:func:`~qwkboost.study.cache.replaced`); the copies say ``reused``. ``directory=None``
    tunes without keeping anything.
    """
    if directory is None:
        return tune()
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{key}.json"
    with FileLock(root / f"{key}.lock"):
        if path.exists():
            return {**json.loads(path.read_text()), "reused": True}
        result = tune()
        with replaced(path) as tmp:
            tmp.write_text(json.dumps(result))
        return result
