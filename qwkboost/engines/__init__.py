"""Training API: one ``train`` for every engine, one ``load_model`` for every saved model.

An engine adapter is a module with ``fit``, ``predict_raw``, ``dump`` and
``load``; see :mod:`qwkboost.engines.xgboost` for the contract.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Callable

import numpy as np

from qwkboost.engines.model import Model, load_model
from qwkboost.objectives import Objective, resolve
from qwkboost.validation import check_1d, check_features, check_same_length

__all__ = ["train", "load_model", "Model", "ENGINES", "get_engine"]

ENGINES = {
    "xgboost": "qwkboost.engines.xgboost",
    "lightgbm": "qwkboost.engines.lightgbm",
    "native": "qwkboost.engines.native",
}


def get_engine(engine: str) -> ModuleType:
    """The adapter module for ``engine``.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the choices.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; available engines: {', '.join(ENGINES)}")
    return importlib.import_module(ENGINES[engine])


def train(X, y, engine: str = "xgboost", objective: str | Objective = "extended_qwk", params: dict | None = None,
          num_boost_round: int = 100, eval_set: tuple | None = None, early_stopping_rounds: int | None = None,
          objective_params: dict | None = None, callbacks: list[Callable[[int, dict], None]] | None = None,
          seed: int = 0) -> Model:
    r"""Boost ``num_boost_round`` trees of ``engine`` on ``objective``.

    The objective is fitted on ``y`` first (its statistics and :math:`F_0`),
    then every engine runs the same gradient, hessian and metric.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Features; NaN is missing.
    y : array-like of shape (n_samples,)
        Labels on their own scale.
    engine : {"xgboost", "lightgbm", "native"}
    objective : str or Objective
        A registered name (see :func:`qwkboost.objectives.available`) or an instance.
    params : dict, optional
        The engine's own parameters, e.g. ``{"max_depth": 5, "learning_rate": 0.1}``.
        ``base_score`` (XGBoost's name), on any engine, replaces the objective's
        initial score :math:`F_0`; ``None`` keeps it.
    num_boost_round : int, default 100
    eval_set : tuple (X_val, y_val), optional
        Scored every round with the objective's metric.
    early_stopping_rounds : int, optional
        Stop when the eval-set metric has not improved for this many rounds;
        needs ``eval_set``.
    objective_params : dict, optional
        Parameters for a named objective, e.g. ``{"hessian": "gauss_newton"}``.
    callbacks : list of callable, optional
        Each is called as ``fn(round, {"train": {...}, "valid": {...}})`` after every round.
    seed : int, default 0

    Returns
    -------
    Model

    Raises
    ------
    ValueError
        For malformed data, an unknown engine or objective, or inconsistent arguments.
    """
    adapter = get_engine(engine)
    obj = resolve(objective, **(objective_params or {}))
    X = check_features(X, "X")
    y = check_1d(y, "y")
    check_same_length(X, y, "X", "y")
    if eval_set is not None:
        if not (isinstance(eval_set, (tuple, list)) and len(eval_set) == 2):
            raise ValueError("eval_set must be a pair (X_val, y_val)")
        Xv = check_features(eval_set[0], "eval_set X")
        yv = check_1d(eval_set[1], "eval_set y")
        check_same_length(Xv, yv, "eval_set X", "eval_set y")
        if Xv.shape[1] != X.shape[1]:
            raise ValueError(f"eval_set X has {Xv.shape[1]} features but X has {X.shape[1]}")
        eval_set = (Xv, yv)
    if isinstance(num_boost_round, bool) or int(num_boost_round) != num_boost_round or num_boost_round < 0:
        raise ValueError(f"num_boost_round must be an integer >= 0; got {num_boost_round!r}")
    if early_stopping_rounds is not None:
        if int(early_stopping_rounds) != early_stopping_rounds or early_stopping_rounds < 1:
            raise ValueError(f"early_stopping_rounds must be a positive integer; got {early_stopping_rounds!r}")
        if eval_set is None:
            raise ValueError("early_stopping_rounds needs an eval_set to score")
    params = dict(params or {})
    base_score = params.pop("base_score", None)
    obj.fit(y)
    if base_score is not None:
        if isinstance(base_score, bool) or not np.isfinite(float(base_score)):
            raise ValueError(f"params.base_score must be a finite number; got {base_score!r}")
        obj.init_score_ = float(base_score)
    booster, num_rounds, best, evals_result = adapter.fit(
        X, y, obj, params, int(num_boost_round), eval_set, early_stopping_rounds, callbacks or [], int(seed))
    return Model(engine, obj, obj.init_score_, booster, num_rounds, best, evals_result, X.shape[1])
