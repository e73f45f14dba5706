"""LightGBM adapter: our objective as a callable ``objective``, its metric as ``feval``.

LightGBM starts custom objectives at 0 and never adds ``init_score`` back at
prediction; we pass :math:`F_0` as ``init_score`` and add it in
:func:`predict_raw`.
"""

from __future__ import annotations

import numpy as np
import lightgbm as lgb

from qwkboost.objectives import Objective

name = "lightgbm"

DEFAULTS = {"verbose": -1}


def fit(X, y, objective: Objective, params: dict, num_boost_round: int, eval_set, early_stopping_rounds,
        callbacks, seed: int):
    """Train; return ``(booster, num_rounds, best_iteration, evals_result)``."""
    if num_boost_round == 0:
        return None, 0, 0, {}
    f0 = objective.init_score_
    params = {**DEFAULTS, **params, "seed": seed, "metric": "None"}

    def fobj(pred, d):
        return objective.grad_hess(y, pred)

    params["objective"] = fobj
    dtrain = lgb.Dataset(X, label=y, init_score=np.full(len(y), f0), free_raw_data=False)
    valid_sets, names = [dtrain], ["train"]
    labels = {"train": y}
    if eval_set is not None:
        Xv, yv = eval_set
        valid_sets.append(lgb.Dataset(Xv, label=yv, init_score=np.full(len(yv), f0), reference=dtrain))
        names.append("valid")
        labels["valid"] = yv
    order = {id(ds): n for ds, n in zip(valid_sets, names)}

    def feval(pred, d):
        return objective.metric_name, objective.metric(labels[order.get(id(d), "train")], pred), \
            objective.higher_is_better

    evals_result: dict = {}
    cbs = [lgb.record_evaluation(evals_result)]
    if early_stopping_rounds:
        cbs.append(lgb.early_stopping(early_stopping_rounds, first_metric_only=True, verbose=False))
    for fn in callbacks or []:
        cbs.append(_wrap(fn))
    # keep every trained round (LightGBM would cut back to the best one), as XGBoost does
    booster = lgb.train(params, dtrain, num_boost_round=num_boost_round, valid_sets=valid_sets,
                        valid_names=names, feval=feval, callbacks=cbs, keep_training_booster=True)
    booster.free_dataset()
    num_rounds = booster.current_iteration()
    best = booster.best_iteration if early_stopping_rounds and booster.best_iteration > 0 else num_rounds
    return booster, num_rounds, best, evals_result


def _wrap(fn):
    def cb(env):
        evals: dict = {}
        for ds, metric, value, _ in env.evaluation_result_list:
            evals.setdefault(ds, {})[metric] = value
        fn(env.iteration, evals)
    cb.order = 30
    return cb


def predict_raw(booster, X, n_iter: int, init_score: float) -> np.ndarray:
    """Label-space scores: LightGBM's raw score plus :math:`F_0`."""
    return booster.predict(X, num_iteration=n_iter, raw_score=True) + init_score


def dump(booster) -> str:
    return booster.model_to_string(num_iteration=-1)


def load(text: str):
    return lgb.Booster(model_str=text)
