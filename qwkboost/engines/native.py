"""qwkboost's own NumPy GBDT (:mod:`qwkboost.native`) as an :class:`~qwkboost.engines.base.Engine`.

The booster keeps :math:`F_0` itself, so :meth:`NativeEngine.predict` adds
``init_score`` to the trees' sum like the other engines.
"""

from __future__ import annotations

import numpy as np

from qwkboost.engines.base import EvalSet, FitResult
from qwkboost.engines.threads import blas_single_thread
from qwkboost.native.boosting import NativeBooster, boost
from qwkboost.native.params import ALIASES, resolve_params
from qwkboost.native.treeshap import booster_shap

__all__ = ["NativeEngine", "THREAD_PARAMS"]

THREAD_PARAMS = ("n_jobs", *(a for a, c in ALIASES.items() if c == "n_jobs"))


class NativeEngine:
    """The native histogram GBDT (see :class:`~qwkboost.engines.base.Engine`)."""

    name = "native"
    thread_params = THREAD_PARAMS
    default_learning_rate = 0.3
    booster_suffix = "json"
    #: the booster checks gradients and hessians for finiteness in its own passes over them
    checks_gradients = True
    scores_while_training = False
    dask = None

    def check_data(self, X, params: dict) -> None:
        """The native engine trains on any rows :func:`qwkboost.train` takes."""

    def check_objective(self, objective) -> None:
        """Every objective runs here (one score per row or several)."""

    def check_params(self, params: dict, *, n_features: int | None) -> None:
        """Refuse unknown names and bad values (:func:`qwkboost.native.params.resolve_params`)."""
        resolve_params(params, n_features)

    def with_threads(self, params: dict, n_threads: int) -> dict:
        """``params`` with ``n_jobs`` set, unless the user gave a thread count."""
        if any(params.get(k) is not None for k in THREAD_PARAMS):
            return params
        return {**{k: v for k, v in params.items() if k not in THREAD_PARAMS}, "n_jobs": int(n_threads)}

    def fit(self, X, y, *, objective, params: dict, num_boost_round: int, valid: EvalSet | None, callbacks,
            seed: int, categorical=(), sample_weight=None) -> FitResult:
        with blas_single_thread():
            booster, stopped_at_best, evals_result = boost(
                X, y, objective, params, num_boost_round, None if valid is None else (valid.X, valid.y, valid.weight),
                callbacks, seed, categorical=tuple(categorical), sample_weight=sample_weight)
        return FitResult(booster, booster.num_rounds, stopped_at_best, evals_result)

    def predict(self, booster: NativeBooster, X, *, n_iter: int, init_score: float) -> np.ndarray:
        """``init_score`` plus the first ``n_iter`` trees."""
        return init_score + booster.predict_margin(X, n_iter)

    def contributions(self, booster: NativeBooster, X, *, n_iter: int, init_score):
        """qwkboost's own path-dependent TreeSHAP of the native trees (:mod:`qwkboost.native.treeshap`), category
        sets and missing values as the trees send them; the bias is the trees' expected value plus ``init_score``."""

        values, expected = booster_shap(booster, X, n_iter)
        n = values.shape[0]
        if booster.n_outputs > 1:
            return values, np.tile(expected + np.asarray(init_score), (n, 1))
        return values, np.full(n, expected[0] + float(init_score))

    def gains(self, booster: NativeBooster, *, n_iter: int, n_outputs: int) -> np.ndarray:
        """The trees' split gains per feature (and output)."""
        out = np.zeros((booster.n_features, n_outputs))
        for t, tree in enumerate(booster.trees[:n_iter * n_outputs]):
            internal = tree.feature >= 0
            np.add.at(out[:, t % n_outputs], tree.feature[internal], tree.gain[internal])
        return out[:, 0] if n_outputs == 1 else out

    def dump(self, booster: NativeBooster) -> str:
        return booster.to_json()

    def load(self, text: str) -> NativeBooster:
        return NativeBooster.from_json(text)

    def to_bytes(self, booster: NativeBooster) -> bytes:
        return booster.to_json().encode()

    def from_bytes(self, data: bytes) -> NativeBooster:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("the native model in the model file is malformed (not UTF-8 text)") from None
        return NativeBooster.from_json(text)

    def shape(self, booster: NativeBooster) -> tuple[int, int]:
        return booster.num_rounds, booster.n_features
