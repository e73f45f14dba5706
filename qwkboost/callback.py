"""Callbacks run after every boosting round, on every engine; early stopping is one of them.

The callback protocol sits below the engines (as ``callback.py`` sits at the top of LightGBM's and XGBoost's
packages): the adapters of :mod:`qwkboost.engines` and qwkboost's own booster (:mod:`qwkboost.native`) both run
it. ``qwkboost.engines.callback`` gives the same names.

A callback is called as ``callback(env)`` with a :class:`CallbackEnv` once a
round's metrics are known. Raising :class:`EarlyStopException` from any
callback stops training after that round, on XGBoost, LightGBM and the native
engine alike (LightGBM's python package works the same way). The model then
predicts with ``exc.best_iteration + 1`` rounds by default.

``qwkboost.train(callbacks=[fn])`` also takes plain functions ``fn(round,
evals)``; they may raise :class:`EarlyStopException` too.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

__all__ = ["CallbackEnv", "EarlyStopException", "EarlyStopping", "RoundFunction", "run_callbacks", "check_min_delta"]


@dataclass(frozen=True)
class CallbackEnv:
    """What a callback sees after a round.

    Attributes
    ----------
    iteration : int
        The round just trained, 0-based.
    evals : dict
        The objective's metric on each eval set this round,
        ``{"train": {"kappa": 0.61}, "valid": {"kappa": 0.60}}``.
    """

    iteration: int
    evals: dict = field(default_factory=dict)


class EarlyStopException(Exception):
    """Raised by a callback to stop training after the current round.

    Parameters
    ----------
    best_iteration : int
        The best round, 0-based; the model keeps every trained round and
        predicts with ``best_iteration + 1`` of them by default.
    best_score : float, optional
    """

    def __init__(self, best_iteration: int, best_score: float | None = None):
        super().__init__(f"early stop; best round {best_iteration}")
        self.best_iteration = int(best_iteration)
        self.best_score = best_score


def check_min_delta(value, name: str = "early_stopping_min_delta") -> float:
    """``value`` as a float, checked: a finite number >= 0.

    Raises
    ------
    ValueError
        Naming ``name`` and the value.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)) \
            or float(value) < 0:
        raise ValueError(f"{name} must be a finite number >= 0 (the smallest change of the metric that counts "
                         f"as an improvement); got {value!r}")
    return float(value)


class EarlyStopping:
    r"""Stop when ``metric`` on ``data`` has not improved by more than ``min_delta`` for ``rounds`` rounds.

    A round counts as an improvement when its score :math:`s` beats the score :math:`s^\circ` of the last
    round that counted by more than ``min_delta``: :math:`s > s^\circ + \delta` (:math:`s < s^\circ - \delta`
    when lower is better), and training stops ``rounds`` rounds after the last such round: the stopping
    rule of XGBoost's and LightGBM's ``min_delta`` (XGBoost's ``EarlyStopping``, LightGBM's
    ``early_stopping`` callback). The model keeps the round with the best score of all those trained
    (``best_iteration``): gains smaller than :math:`\delta` do not keep training going, but are not thrown
    away either (XGBoost and LightGBM would keep the last round that counted). With :math:`\delta = 0` both
    are the strict rule of XGBoost's and LightGBM's own early stopping, so results match theirs round for
    round.

    Attributes
    ----------
    best_iteration : int or None
        The best round so far, 0-based.
    best_score : float or None
    """

    def __init__(self, rounds: int, metric: str, higher_is_better: bool, data: str = "valid",
                 min_delta: float = 0.0):
        self.rounds = int(rounds)
        self.metric = metric
        self.sign = 1.0 if higher_is_better else -1.0
        self.data = data
        self.min_delta = check_min_delta(min_delta)
        self.best_iteration: int | None = None
        self.best_score: float | None = None
        self._counted: tuple[int, float] | None = None      # the last round that counted, and its score

    def __call__(self, env: CallbackEnv) -> None:
        score = env.evals[self.data][self.metric]
        if self.best_score is None or self.sign * score > self.sign * self.best_score:
            self.best_iteration, self.best_score = env.iteration, score
        if self._counted is None or self.sign * (score - self._counted[1]) > self.min_delta:
            self._counted = (env.iteration, score)
        elif env.iteration - self._counted[0] >= self.rounds:
            raise EarlyStopException(self.best_iteration, self.best_score)


class RoundFunction:
    """A user's ``fn(round, evals)`` as a callback."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, env: CallbackEnv) -> None:
        self.fn(env.iteration, env.evals)


def run_callbacks(callbacks, iteration: int, evals: dict) -> None:
    """Call every callback with this round's :class:`CallbackEnv`.

    Raises
    ------
    EarlyStopException
        From any callback that asks to stop.
    """
    env = CallbackEnv(iteration, evals)
    for cb in callbacks:
        cb(env)
