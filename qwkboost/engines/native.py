"""Native adapter: qwkboost's own NumPy GBDT (:mod:`qwkboost.native`).

The booster keeps :math:`F_0` itself, so the contract matches the other
adapters: :func:`predict_raw` returns label-space scores.
"""

from __future__ import annotations

import numpy as np

from qwkboost.native.boosting import NativeBooster, train_booster
from qwkboost.objectives import Objective

name = "native"


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
