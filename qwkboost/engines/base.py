"""The engine contract: what :func:`qwkboost.train` asks of XGBoost, LightGBM, CatBoost and the native engine.

An engine is a class with the methods of :class:`Engine`; the registry
(:mod:`qwkboost.engines.registry`) names them. Data crosses the boundary as
named objects: the validation rows as an :class:`EvalSet`, the outcome of
training as a :class:`FitResult`.

Every engine trains on labels centred by :func:`qwkboost.engines.label_offset`
and calls the objective through :class:`qwkboost.engines.EngineObjective`, so
an engine never sees either detail. After each round it calls every callback
with a :class:`qwkboost.engines.callback.CallbackEnv`, and stops when one raises
:class:`qwkboost.engines.callback.EarlyStopException`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol, Sequence, runtime_checkable

import numpy as np

from qwkboost.engines.callback import run_callbacks

__all__ = ["EvalSet", "FitResult", "Engine", "run_callbacks"]


@dataclass(frozen=True)
class EvalSet:
    """Validation rows, scored with the objective's metric after every round (weighted by ``weight``)."""

    X: np.ndarray
    y: np.ndarray
    weight: np.ndarray | None = None


@dataclass(frozen=True)
class FitResult:
    """What an engine's :meth:`Engine.fit` returns.

    Attributes
    ----------
    booster : object
        The engine's own model; ``None`` after zero rounds on LightGBM.
    num_rounds : int
        Rounds trained (every one is kept).
    stopped_at_best : int or None
        The best round, 0-based, if a callback stopped training; else ``None``.
    evals_result : dict
        ``{"train": {metric: [...]}, "valid": {metric: [...]}}``.
    """

    booster: Any
    num_rounds: int
    stopped_at_best: int | None = None
    evals_result: dict = field(default_factory=dict)


@runtime_checkable
class Engine(Protocol):
    """The methods every engine implements (keyword-only beyond the data)."""

    name: ClassVar[str]
    #: the engine's names for its thread count, e.g. ``("nthread", "n_jobs")``
    thread_params: ClassVar[tuple[str, ...]]

    def check_params(self, params: dict, *, n_features: int | None) -> None:
        """Refuse unknown names and bad values before training (``ValueError`` naming them); with
        ``n_features=None`` (a config checked before its data is read), the checks that need no data."""

    def check_objective(self, objective) -> None:
        """Refuse, before training, a fitted objective the engine cannot run (``ValueError`` naming the engines
        that run it)."""

    def with_threads(self, params: dict, n_threads: int) -> dict:
        """``params`` with the thread count set, unless it names one already."""

    def fit(self, X: np.ndarray, y: np.ndarray, *, objective, params: dict, num_boost_round: int,
            valid: EvalSet | None, callbacks: Sequence[Callable], seed: int,
            categorical: Sequence[int] = (), sample_weight: np.ndarray | None = None) -> FitResult:
        """Boost ``num_boost_round`` rounds from ``objective.init_score_``.

        ``categorical`` lists the columns of ``X`` that hold category codes
        (0, 1, ...; NaN missing), see :class:`qwkboost.data.features.FeatureSchema`.
        ``sample_weight`` weighs the training rows in the metric; the objective
        already weighs its gradients. Engines get no weights of their own, so that
        nothing is weighted twice.
        """

    def predict(self, booster, X: np.ndarray, *, n_iter: int, init_score: float) -> np.ndarray:
        """Scores of the first ``n_iter`` rounds plus ``init_score`` (the engine's own labels' scale)."""

    def contributions(self, booster, X: np.ndarray, *, n_iter: int, init_score) -> tuple[np.ndarray, np.ndarray]:
        """SHAP values of the first ``n_iter`` rounds and the bias, ``(values, bias)``: ``values`` of shape
        ``(n, n_features)`` (``(n, n_features, K)`` with several outputs), ``bias`` of shape ``(n,)`` (``(n, K)``),
        such that ``values.sum(axis=1) + bias`` is :meth:`predict` with the same arguments."""

    def gains(self, booster, *, n_iter: int, n_outputs: int) -> np.ndarray:
        """Total split gain of each feature over the first ``n_iter`` rounds: ``(n_features,)``, or
        ``(n_features, n_outputs)`` with several outputs."""

    def dump(self, booster) -> str:
        """The booster as text."""

    def load(self, text: str):
        """A booster from :meth:`dump`'s text (``ValueError`` if malformed)."""

    def shape(self, booster) -> tuple[int, int]:
        """``(rounds, features)`` of a booster."""
