"""Native adapter: qwkboost's own NumPy GBDT (:mod:`qwkboost.native`).

The booster keeps :math:`F_0` itself, so the contract matches the other
adapters: :func:`predict_raw` returns label-space scores.
"""

from __future__ import annotations

import numpy as np

from qwkboost.native.boosting import NativeBooster, train_booster
from qwkboost.native.params import ALIASES, resolve_params
from qwkboost.objectives import Objective

name = "native"
THREAD_PARAMS = ("n_jobs", *(a for a, c in ALIASES.items() if c == "n_jobs"))


def check_params(params: dict, n_features: int) -> None:
    """Refuse unknown names and bad values (:func:`qwkboost.native.params.resolve_params`)."""
    resolve_params(params, n_features)


def set_threads(params: dict, n_threads: int) -> dict:
    """``params`` with ``n_jobs`` set, unless the user gave a thread count."""
    if any(params.get(k) is not None for k in THREAD_PARAMS):
        return params
    return {**{k: v for k, v in params.items() if k not in THREAD_PARAMS}, "n_jobs": int(n_threads)}


def fit(X, y, objective: Objective, params: dict, num_boost_round: int, eval_set, early_stopping_rounds,
        callbacks, seed: int):
    """Train; return ``(booster, num_rounds, best_iteration, evals_result)``."""
    return train_booster(X, y, objective, params, num_boost_round, eval_set, early_stopping_rounds,
                         callbacks, seed)


def predict_raw(booster: NativeBooster, X, n_iter: int, init_score: float) -> np.ndarray:
    """Label-space scores from the first ``n_iter`` rounds: ``init_score`` plus the trees."""
    return init_score + booster.predict_margin(X, n_iter)


def dump(booster: NativeBooster) -> str:
    return booster.to_json()


def load(text: str) -> NativeBooster:
    return NativeBooster.from_json(text)


def shape(booster: NativeBooster) -> tuple[int, int]:
    """``(rounds, features)`` of a booster."""
    return booster.num_trees, booster.n_features
