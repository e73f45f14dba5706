"""XGBoost adapter: our objective as ``obj=``, its metric as ``custom_metric=``.

XGBoost keeps ``base_score=0.5`` under a custom objective; we set it to the
objective's :math:`F_0`, so the booster itself predicts in label space.
"""

from __future__ import annotations

import numpy as np
import xgboost as xgb

from qwkboost.objectives import Objective

name = "xgboost"

DEFAULTS = {"tree_method": "hist", "verbosity": 0}


class _RoundCallback(xgb.callback.TrainingCallback):
    def __init__(self, fns):
        self.fns = fns

    def after_iteration(self, model, epoch, evals_log):
        for fn in self.fns:
            fn(epoch, {k: {m: v[-1] for m, v in d.items()} for k, d in evals_log.items()})
        return False


def fit(X, y, objective: Objective, params: dict, num_boost_round: int, eval_set, early_stopping_rounds,
        callbacks, seed: int):
    """Train; return ``(booster, num_rounds, best_iteration, evals_result)``."""
    params = {**DEFAULTS, **params, "base_score": objective.init_score_, "seed": seed,
              "disable_default_eval_metric": 1}
    params.pop("objective", None)
    dtrain = xgb.DMatrix(X, label=y)
    evals = [(dtrain, "train")]
    if eval_set is not None:
        evals.append((xgb.DMatrix(eval_set[0], label=eval_set[1]), "valid"))

    def obj(pred, d):
        return objective.grad_hess(y, pred.astype(np.float64))

    labels = {id(dtrain): y}
    if eval_set is not None:
        labels[id(evals[1][0])] = eval_set[1]

    def feval(pred, d):
        return objective.metric_name, objective.metric(labels[id(d)], pred.astype(np.float64))

    evals_result: dict = {}
    booster = xgb.train(
        params, dtrain, num_boost_round=num_boost_round, evals=evals, obj=obj, custom_metric=feval,
        maximize=objective.higher_is_better, early_stopping_rounds=early_stopping_rounds,
        evals_result=evals_result, verbose_eval=False,
        callbacks=[_RoundCallback(callbacks)] if callbacks else None,
    )
    num_rounds = booster.num_boosted_rounds()
    best = booster.best_iteration + 1 if early_stopping_rounds and num_rounds else num_rounds
    return booster, num_rounds, best, evals_result


def predict_raw(booster, X, n_iter: int, init_score: float) -> np.ndarray:
    """Label-space scores from the first ``n_iter`` rounds (``base_score`` is :math:`F_0`)."""
    out = booster.predict(xgb.DMatrix(X), iteration_range=(0, n_iter), output_margin=True)
    return out.astype(np.float64)


def dump(booster) -> str:
    return bytes(booster.save_raw("json")).decode()


def load(text: str):
    b = xgb.Booster()
    b.load_model(bytearray(text.encode()))
    return b
